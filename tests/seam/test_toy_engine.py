"""The engine seam (issue 30): a third engine is one folder and one registry line. The toy engine
(tests/seam/toy_engine/: its engine object, its own tables, a stand-in server) is copied into a
private copy of dynspec as dynspec_cli/engines/toy/ and registered with one line in
dynspec_cli/engines/__init__.py's ENGINES (tests/support/seam.py); then `dynspec verify` and `dynspec
launch` run through the CLI on it, and the copy's difference from this checkout is exactly that
folder and that line.

The expected verdicts are a person's reading of tests/seam/toy-server.log, the toy server's recorded
run: line 1 says release 1.2 is starting, line 2 that it speculates with method ngram (lookahead 4),
line 3 is the patch's own line (`ToyDraft patch active: lookahead=4`), line 5 says ready. So: live,
release 1.2, method ngram, the marker at line 3 with lookahead 4, ready. With line 2 saying
`speculative decoding: off` and no line 3 the patch cannot run: dead. With only line 1 nothing is
known yet: inconclusive."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dynspec_cli.engines import protocol
from tests.run.helpers import free_port
from tests.support.seam import changed, run, with_member

HERE = Path(__file__).resolve().parent
TOY = HERE / "toy_engine"
LOG = HERE / "toy-server.log"
LINE = '"toy": "dynspec_cli.engines.toy",'


@pytest.fixture(scope="module")
def dest(tmp_path_factory):
    return with_member(tmp_path_factory.mktemp("seam"), TOY, "engines/toy", "engines/__init__.py", "ENGINES", LINE)


def feature(dest: Path) -> str:
    return str(dest / "dynspec_cli" / "engines" / "toy" / "feature.toml")


def verify(dest: Path, log: Path, *args: str) -> tuple[int, dict]:
    r = run(dest, "verify", str(log), "--engine", "toy", "--feature", feature(dest), "--json", *args)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def test_the_copy_differs_by_one_folder_and_one_line(dest):
    diff = changed(dest)
    folder = "dynspec_cli/engines/toy/"
    assert diff["added"] and all(p.startswith(folder) for p in diff["added"]), diff["added"]
    assert diff["edited"] == {"dynspec_cli/engines/__init__.py": (1, 0)}, diff["edited"]
    print(f"\nthe toy engine: {len(diff['added'])} new file(s) in {folder}, 1 line added to "
          f"dynspec_cli/engines/__init__.py; no other file of dynspec touched")


def test_the_toy_keeps_the_whole_contract(dest):
    code = ("import json; from dynspec_cli import engines; from dynspec_cli.engines import protocol; "
            "print(json.dumps({n: protocol.missing(engines.get(n)) for n in engines.names()}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=dest,
                       env={**os.environ, "PYTHONPATH": str(dest)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"sglang": [], "vllm": [], "toy": []}
    assert protocol.members()  # (the contract is not empty)


def test_verify_reads_the_recorded_toy_log_live(dest):
    code, doc = verify(dest, LOG)
    assert code == 0 and doc["verdict"] == "live" and doc["engine"] == "toy"
    assert doc["engine_version"] == "1.2" and doc["speculative_algorithm"] == "ngram"
    assert doc["marker"]["found"] and doc["marker"]["line"] == 3 and doc["marker"]["fields"] == {"lookahead": "4"}
    assert doc["server_ready"] is True and doc["crashed"] is False
    assert "sglang_version" not in doc  # an engine without a version key of its own


def test_verify_speculation_off_is_dead_and_a_bare_start_inconclusive(dest, tmp_path):
    lines = LOG.read_text().splitlines(keepends=True)
    off = tmp_path / "off.log"
    off.write_text(lines[0] + lines[1].replace("method=ngram lookahead=4", "off") + "".join(lines[3:]))
    code, doc = verify(dest, off)
    assert code == 1 and doc["verdict"] == "dead" and not doc["marker"]["found"]
    assert [f["code"] for f in doc["findings"] if f["severity"] == "error"] == ["DS102"]
    bare = tmp_path / "bare.log"
    bare.write_text(lines[0])
    code, doc = verify(dest, bare)
    assert code == 3 and doc["verdict"] == "inconclusive" and doc["engine_version"] == "1.2"
    # the report (not --json) reads the same verdict
    r = run(dest, "verify", str(LOG), "--engine", "toy", "--feature", feature(dest))
    assert r.returncode == 0 and "LIVE" in r.stdout and "toy" in r.stdout, r.stdout + r.stderr


def test_auto_tells_the_toy_log_by_its_own_detection_table(dest):
    r = run(dest, "verify", str(LOG), "--feature", feature(dest), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["engine"] == "toy", r.stdout + r.stderr


def test_launch_a_toy_profile_through_the_cli(dest, tmp_path):
    name = f"toy-{uuid.uuid4().hex[:8]}"
    prof = tmp_path / "toy.toml"
    prof.write_text("\n".join([
        f"name = {json.dumps(name)}", 'engine = "toy"', f"feature = {json.dumps(feature(dest))}",
        f"python = {json.dumps(sys.executable)}", 'model = "/models/toy"', f"workdir = {json.dumps(str(dest))}",
        f"port = {free_port()}", f"log = {json.dumps(str(tmp_path / (name + '.log')))}", "ready_timeout = 60",
        "[env]", f"TOY_REPLAY = {json.dumps(str(LOG))}"]) + "\n")
    try:
        r = run(dest, "launch", str(prof), "--json", timeout=120)
        assert r.returncode == 0, r.stderr + r.stdout
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "live" and doc["engine"] == "toy" and doc["server_ready"]
        assert doc["marker"]["fields"] == {"lookahead": "4"}
        assert doc["run"]["why"] == "ready" and doc["run"]["health"] == "/health 200"  # the toy's readiness path
        # (`status` re-reads a run's feature by its name, which only bundled features have: not asked here)
    finally:
        s = run(dest, "stop", name)
    assert s.returncode == 0 and "no process remains" in s.stdout, s.stdout + s.stderr


def test_preflight_is_the_toys_own(dest):
    """The gate launch runs first: the toy's preflight finds its server's source with the server's
    python and the patch's line in it (toy_engine/server.py does not log the marker: unknown), and
    prints its own report."""
    r = run(dest, "preflight", "--engine", "toy", "--feature", feature(dest), "--python", sys.executable, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 3 and doc["engine"] == "toy" and doc["verdict"] == "unknown", r.stdout + r.stderr
    assert [f["code"] for f in doc["findings"]] == ["DS304"]
    r = run(dest, "preflight", "--engine", "toy", "--feature", feature(dest), "--python", sys.executable)
    assert r.returncode == 3 and r.stdout.startswith("toy preflight: UNKNOWN (exit 3)"), r.stdout + r.stderr

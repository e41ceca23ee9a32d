"""The smoke suite, run through the `dynspec` console script of the built wheel installed into a
fresh venv of every declared Python (tests/installed/conftest.py): what users run, not the source
tree. The full suite runs on one interpreter from the source tree; this checks that the install
itself carries everything (tables, demo logs, inspectors, probe) and runs on each Python."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.installed.conftest import PYPROJECT, REPO, declared_pythons, find_python, user_env
from tests.run.helpers import cleanup, free_port, record, write_profile

FIXTURE_LOGS = sorted((REPO / "tests" / "fixtures" / "logs").rglob("*.log"))
SOURCE = [sys.executable, "-m", "dynspec_cli"]


def source(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The same command from the source tree (the reference the installed one must match)."""
    return subprocess.run(SOURCE + list(args), capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="session")
def source_verdicts() -> dict[Path, tuple[int, str]]:
    def one(log):
        r = source("verify", "--json", str(log))
        return log, (r.returncode, r.stdout)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, FIXTURE_LOGS))


# --- what the distributions hold (once, not per interpreter) ------------------------------------
def _tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_wheel_holds_every_table_and_program_of_the_source_tree(dist):
    names = set(zipfile.ZipFile(dist["wheel"]).namelist())
    tables = {f"dynspec_cli/configs/{n}" for n in _tree(REPO / "configs")}
    # the programs run in other interpreters: inject/, and each engine's inspector and probe folders
    programs = {f"dynspec_cli/{n}" for n in _tree(REPO / "dynspec_cli")
                if n.startswith("inject/") or "/inspector/" in n or "/probe/" in n}
    code = {f"dynspec_cli/{n}" for n in _tree(REPO / "dynspec_cli") if n.endswith(".py")}
    assert len(tables) > 20 and len(programs) > 10
    missing = sorted((tables | programs | code) - names)
    assert not missing, f"the wheel lacks {len(missing)} file(s) of the source tree: {missing[:20]}"
    # nothing of the tests or the GPU recipe is shipped to users
    assert not [n for n in names if n.startswith(("tests/", "gpu/", "benchmarks/"))]


def test_the_sdist_builds_the_same_wheel_contents(dist, tmp_path):
    """pip install from the sdist (what a source install does) must not lose the tables either."""
    import tarfile

    with tarfile.open(dist["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert "configs/sglang/frames.toml" in names and "dynspec_cli/engines/sglang/probe/sitecustomize.py" in names
    assert "pyproject.toml" in names and "README.md" in names


# --- through the installed console script, on every Python --------------------------------------
def test_version_names_the_release_the_python_and_the_installed_tables(installed):
    r = installed.run("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"dynspec {PYPROJECT['project']['version']} (python {installed.version}.")
    # the tables are the installed wheel's, inside the venv, not this source tree's
    tables = r.stdout.split("tables ", 1)[1].split(" (", 1)[0]
    assert Path(tables).is_relative_to(installed.venv) and Path(tables, "sglang", "frames.toml").is_file()
    assert "(an installed wheel))" in r.stdout
    where = subprocess.run([installed.interpreter, "-c", "import dynspec_cli; print(dynspec_cli.__file__)"],
                           capture_output=True, text=True, cwd=installed.venv, env=user_env()).stdout.strip()
    assert Path(where).is_relative_to(installed.venv), where


def test_demo_shows_dead_then_live(installed):
    r = installed.run("demo", "--speed", "200", timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # seed-dead.log: the patch in EAGLEWorkerV2, 0.5.9 without SGLANG_ENABLE_SPEC_V2 -> EAGLEWorker runs
    dead, live = r.stdout.split("▶ ")[1:3]
    assert "DEAD" in dead and "DS201" in dead and "EAGLEWorker " in dead
    assert "LIVE" in live and "Dynamic speculation disable enabled: threshold=5" in live
    assert "internal error" not in r.stderr


def test_verify_json_on_every_fixture_log_is_the_source_trees(installed, source_verdicts):
    assert len(FIXTURE_LOGS) > 100

    def one(log):
        r = installed.run("verify", "--json", str(log))
        return log, (r.returncode, r.stdout), r.stderr

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, FIXTURE_LOGS))
    differ = []
    for log, got, err in results:
        want = source_verdicts[log]
        assert "internal error" not in err, f"{log}: {err}"
        if got[0] != want[0] or json.loads(got[1]) != json.loads(want[1]):
            differ.append(f"{log.relative_to(REPO)}: exit {got[0]} vs {want[0]}")
    assert not differ, "\n".join(differ)
    verdicts = {json.loads(out)["verdict"] for (_, out) in (got for _, got, _ in results)}
    assert {"live", "dead", "crashed"} <= verdicts  # the logs reach every table, not only the demo's


def test_explain_is_the_source_trees(installed):
    for args in (["explain"], ["explain", "DS201"]):
        got, want = installed.run(*args), source(*args)
        assert got.returncode == want.returncode == 0, got.stderr
        assert got.stdout == want.stdout
    assert "patched-class-not-running" in installed.run("explain", "DS201").stdout


def test_bad_input_is_one_line_and_exit_2(installed, tmp_path):
    r = installed.run("verify", str(tmp_path / "no-such.log"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no-such.log" in r.stderr and "Traceback" not in r.stderr


def test_verify_judges_a_launched_log_with_its_runs_diff(installed, tmp_path):
    """A benchmark script's gate on the GPU box: `dynspec verify server.log` with no --patch, on issue 29's
    case c log, finds the run's record by the log's launch header (tests/cli/test_verify_record.py)."""
    from tests.cli.test_verify_record import place_case_c

    log, home, rec = place_case_c(tmp_path)
    (home / "runs" / "tiny-mc.json").write_text(json.dumps(rec))
    r = installed.run("verify", "--json", str(log), env={"DYNSPEC_HOME": str(home)})
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["verdict"]) == (0, "live"), r.stderr
    assert "run tiny-mc's patch" in r.stderr


@pytest.mark.wheels
def test_preflight_against_a_real_sglang_wheel(installed, tmp_path):
    """The classic failure, before launch, from the installed dynspec: sglang 0.5.9, the patch in
    EAGLEWorkerV2, SGLANG_ENABLE_SPEC_V2 unset -> EAGLEWorker runs (sglang/srt/server_args.py and
    speculative/spec_info.py of the 0.5.9 wheel); with it set and topk 1, V2 runs."""
    from tests.preflight.conftest import make_sglang_python

    py, _, _ = make_sglang_python(tmp_path, "0.5.9")
    spec = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
            "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4",
            "--speculative-disable-batch-threshold", "5"]
    r = installed.run("preflight", "--python", py, "--json", "--", *spec, "--speculative-eagle-topk", "4")
    d = json.loads(r.stdout)
    assert r.returncode == 1 and d["verdict"] == "dead" and d["worker"]["class"] == "EAGLEWorker", r.stderr
    assert "DS201" in [f["code"] for f in d["findings"]]
    r = installed.run("preflight", "--python", py, "--json", "--env=SGLANG_ENABLE_SPEC_V2=True", "--",
                      *spec, "--speculative-eagle-topk", "1")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["verdict"] == "reachable" and d["worker"]["class"] == "EAGLEWorkerV2", r.stderr


def test_a_run_from_launch_to_stop_against_the_stand_in(installed, tmp_path):
    """launch (with the probe: the installed wheel's probe files go into the server), status,
    watch, prove, gate, guard around a load generator, stop: the GPU-server stand-in replays a
    real sglang's lines (tests/standin)."""
    name = f"inst-{installed.version}-{uuid.uuid4().hex[:6]}"
    threshold = 3
    prof = write_profile(tmp_path / f"{name}.toml", name, port=free_port(), env={"SGLANG_ENABLE_SPEC_V2": "True"},
                         flags={"speculative-disable-batch-threshold": threshold, "decode-log-interval": 2,
                                "enable-metrics": True, "tp-size": 1})
    patched = tmp_path / "eagle_worker_v2.py"
    patched.write_text("# patched: Dynamic speculation disable enabled: threshold=%d\n")
    try:
        r = installed.run("launch", str(prof), "--no-preflight", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        assert doc["verdict"] == "live" and doc["server_ready"] is True, doc
        rec = record(name)
        probe = Path(rec["env"]["PYTHONPATH"].split(":")[0])
        # the probe the installed wheel shipped is the one the server imported
        assert probe.is_relative_to(installed.venv) and (probe / "sitecustomize.py").is_file(), probe

        r = installed.run("status", name, "--json")
        (row,) = json.loads(r.stdout)["runs"]
        assert r.returncode == 0 and row["alive"] is True and row["verdict"] == "live"

        r = installed.run("watch", name, "--timeout", "60")
        assert r.returncode == 0 and "LIVE" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]

        r = installed.run("prove", name, "--duration", "1", "--max-new-tokens", "24", "--patched-file", str(patched),
                          "--steps", "1,N,N+1,2N", timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        r = installed.run("gate", name, "--max-age", "1h")
        assert r.returncode == 0, r.stderr

        bench = [installed.interpreter, str(REPO / "gpu" / "device" / "throughput.py"), str(rec["port"]),
                 "--concurrency", "2", "--duration", "6", "--max-new-tokens", "48"]
        out = tmp_path / "bench.jsonl"
        r = installed.run("guard", name, "--window", "1.5", "--report", str(out.with_suffix(".guard.json")), "--", *bench,
                          timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert '"tokens_per_s"' in r.stdout or "tok" in r.stdout  # the benchmark's own output, passed through
        assert "✓ VALID" in r.stderr
        guard = json.loads(out.with_suffix(".guard.json").read_text())
        assert guard["valid"] is True and any(w["state"] == "effective" for w in guard["windows"])

        r = installed.run("stop", name)
        assert r.returncode == 0 and "no process remains" in r.stdout, r.stdout + r.stderr
    finally:
        cleanup(name)


def test_pipx_install_of_the_wheel_on_the_oldest_declared_python(dist, tmp_path):
    """`pipx install` as the README says, into its own PIPX_HOME (never the user's), on the oldest
    Python the package declares (Ubuntu 22.04's 3.10 today)."""
    oldest = min(declared_pythons(), key=lambda v: tuple(map(int, v.split("."))))
    python, why = find_python(oldest)
    if python is None:
        pytest.skip(why)
    env = {**os.environ, "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man")}
    r = subprocess.run([sys.executable, "-m", "pipx", "install", "--python", python, str(dist["wheel"])],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    exe = tmp_path / "bin" / "dynspec"
    v = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert v.returncode == 0 and f"(python {oldest}." in v.stdout and str(tmp_path / "pipx") in v.stdout, v.stdout
    d = subprocess.run([str(exe), "demo", "--speed", "200"], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert d.returncode == 0, d.stdout[-2000:] + d.stderr[-2000:]


def test_a_zipped_install_finds_its_tables(dist, tmp_path):
    """dynspec imported from an archive (a wheel on sys.path, as zipapp and shiv ship it): the
    tables have no path there, so they are unpacked once into the cache and read from there."""
    log = REPO / "tests" / "fixtures" / "logs" / "gpu-h200" / "0.5.12.post1" / "dead-spec-v2-false.log"
    env = {**os.environ, "PYTHONPATH": str(dist["wheel"]), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", str(log)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path, env=env)
    assert "internal error" not in r.stderr, r.stderr
    assert json.loads(r.stdout) == json.loads(source("verify", "--json", str(log)).stdout)
    assert r.returncode == 1  # EAGLEWorker runs (the log's line 8): the patch in EAGLEWorkerV2 is dead
    v = subprocess.run([sys.executable, "-m", "dynspec_cli", "--version"], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env=env)
    assert "(a zipped install, unpacked into the cache))" in v.stdout and str(tmp_path / "cache") in v.stdout, v.stdout


def test_the_readmes_first_command_on_a_fresh_venv_of_the_oldest_python(tmp_path):
    """The README opens with the command that sets up and runs the main job; it must work as
    written on a fresh machine, whose `python3` may be the oldest Python the package declares."""
    import re

    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S).group(1)
    first = block.splitlines()[0].split("  #", 1)[0].strip()
    assert first.startswith("python3 -m pip install") and first.endswith("dynspec demo"), first
    oldest = min(declared_pythons(), key=lambda v: tuple(map(int, v.split("."))))
    python, why = find_python(oldest)
    if python is None:
        pytest.skip(why)
    venv = tmp_path / "fresh"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    r = subprocess.run(["sh", "-c", first], cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "DEAD" in r.stdout and "LIVE" in r.stdout
    direct = subprocess.run([str(venv / "bin" / "python"), "-c", "import dynspec_cli; print(dynspec_cli.__file__)"],
                            capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    assert direct.startswith(str(venv)), direct  # installed into the venv, not run from the tree

"""`dynspec preflight --sbatch FILE`: the user's own sbatch script, read before it is submitted.

The fixtures are in the form of SGLang's own multi-node Slurm recipe (tests/fixtures/sbatch/). The
expected findings come from what bash and Slurm do with the script, shown on the real two-node
cluster at the end: the recipe's form starts both nodes as rank 0, the fixed form as 0 and 1."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.slurm.helpers import ds, write_slurm_profile

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sbatch"
DOC = (FIX / "doc_form.sbatch").read_text()
FIXED = (FIX / "fixed_form.sbatch").read_text()


def check(tmp_path, text: str) -> tuple[int, list[dict]]:
    p = tmp_path / "job.sbatch"
    p.write_text(text)
    r = ds("preflight", "--sbatch", str(p), "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)["findings"]


def codes(findings) -> list[str]:
    return [f["code"] for f in findings]


def test_doc_form_is_the_rank_expansion_mistake(tmp_path):
    rc, found = check(tmp_path, DOC)
    assert rc == 1 and codes(found) == ["DS501"]
    assert found[0]["line"] == 16  # the srun line, where the batch shell expands it
    assert "$SLURM_NODEID" in found[0]["message"]


def test_doc_form_as_text_names_the_fix(tmp_path):
    p = tmp_path / "job.sbatch"
    p.write_text(DOC)
    r = ds("preflight", "--sbatch", str(p))
    assert r.returncode == 1
    assert "DS501 slurm-rank-expanded-in-batch (line 16)" in r.stdout and "bash -c '" in r.stdout


def test_fixed_form_is_clean(tmp_path):
    assert check(tmp_path, FIXED) == (0, [])


@pytest.mark.parametrize("edit, code", [
    (lambda s: s.replace("    --nnodes 2 \\\n", ""), "DS502"),
    (lambda s: s.replace('    --dist-init-addr "$INIT_ADDR" \\\n', ""), "DS502"),
    (lambda s: s.replace(":8000", ":30000"), "DS503"),  # sglang's default --port is 30000
    (lambda s: s.replace(":8000", ":8100").replace("--tp 16", "--tp 16 --port 8100"), "DS503"),
    (lambda s: s.replace("#SBATCH --nodes=2", "#SBATCH --nodes=4").replace("--nodes=2 ", "--nodes=4 "), "DS504"),
    (lambda s: s.replace("--nnodes 2", "--nnodes 3"), "DS504"),
], ids=["no-nnodes", "no-dist-init-addr", "port-default", "port-given", "sbatch-4-nnodes-2", "nnodes-3"])
def test_each_mistake_is_one_finding(tmp_path, edit, code):
    rc, found = check(tmp_path, edit(FIXED))
    assert rc == 1 and codes(found) == [code], found


def test_rank_through_a_batch_variable_is_the_same_mistake(tmp_path):
    text = FIXED.replace("export INIT_ADDR", "NODE_RANK=$SLURM_NODEID\nexport INIT_ADDR").replace(
        "srun --ntasks=2 --nodes=2 bash -c '", "srun --ntasks=2 --nodes=2 bash -c \"").replace(
        '--node-rank "$SLURM_NODEID"\'', '--node-rank $NODE_RANK"')
    rc, found = check(tmp_path, text)
    assert rc == 1 and codes(found) == ["DS501"] and "set from SLURM_NODEID on line 11" in found[0]["message"]


def test_escaped_rank_is_read_in_the_task(tmp_path):
    text = DOC.replace('--node-rank "$SLURM_NODEID"', "--node-rank \\$SLURM_NODEID")
    rc, found = check(tmp_path, text)
    assert "DS501" not in codes(found)


def test_dynspecs_own_node_script_passes(tmp_path):
    prof = write_slurm_profile(tmp_path / "s.toml", "own")
    prof.write_text(prof.read_text().replace('module = "fake_sglang_server"', 'module = "sglang.launch_server"'))
    r = ds("launch", str(prof), "--dry-run")
    node = r.stdout.split("(every task)\n")[1]
    rc, found = check(tmp_path, node)
    assert rc == 0 and found == []


def test_no_such_script_is_one_line_exit_2(tmp_path):
    r = ds("preflight", "--sbatch", str(tmp_path / "nope.sbatch"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such sbatch script" in r.stderr


@pytest.mark.parametrize("kind", ["directory", "fifo", "binary"])
def test_unreadable_script_is_unknown_exit_3_never_a_finding(tmp_path, kind):
    import os

    p = tmp_path / "job.sbatch"
    if kind == "directory":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)  # no writer: must not hang
    else:
        p.write_bytes(b"#!/bin/bash\n\0\0\x7fELF")
    r = ds("preflight", "--sbatch", str(p), "--json", timeout=20)
    doc = json.loads(r.stdout)
    assert r.returncode == 3 and doc["verdict"] == "unknown" and doc["findings"] == [], r.stdout + r.stderr
    assert doc["note"].startswith("cannot read the script")
    t = ds("preflight", "--sbatch", str(p), timeout=20)
    assert t.returncode == 3 and t.stdout.startswith(f"? {p}: unknown: cannot read the script")


def test_a_latin_1_byte_does_not_make_a_script_unreadable(tmp_path):
    p = tmp_path / "job.sbatch"
    p.write_bytes("# caf\xe9\n#SBATCH --nodes=2\nsrun python -m sglang.launch_server --node-rank $SLURM_NODEID\n"
                  .encode("latin-1"))
    r = ds("preflight", "--sbatch", str(p), "--json")
    found = json.loads(r.stdout)["findings"]
    assert r.returncode == 1 and [f["code"] for f in found] == ["DS501", "DS502"]


def expected(path: Path) -> str:
    """The hand verdict written in the fixture (`# expect: DS501`, `none`, `unknown`)."""
    for line in path.read_text().splitlines():
        if line.startswith("# expect: "):
            return line[len("# expect: "):].strip()
    raise AssertionError(f"{path} has no '# expect:' line")


FIXTURES = sorted(FIX.glob("*.sbatch")) + sorted((FIX / "real").iterdir())


def verdict_of(tmp_path, path: Path) -> tuple[str, dict]:
    r = ds("preflight", "--sbatch", str(path), "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"] == {"dead": 1, "ok": 0, "unknown": 3}[doc["verdict"]], r.stderr
    got = ",".join(f["code"] for f in doc["findings"]) or ("unknown" if doc["verdict"] == "unknown" else "none")
    return got, doc


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_each_script_gets_its_hand_verdict(tmp_path, path):
    """The real public scripts (tests/fixtures/sbatch/real: each with its source and why) and the
    forms of issue 22: vLLM scripts are judged as vLLM, not "no sglang launch"; no launch dynspec can
    read is unknown (exit 3), not a finding."""
    got, doc = verdict_of(tmp_path, path)
    assert got == expected(path), doc
    assert "no sglang launch" not in json.dumps(doc)


def test_precision_and_recall_on_the_real_scripts(tmp_path):
    tp = fp = fn = unknown = 0
    real = sorted((FIX / "real").iterdir())
    for path in real:
        want = expected(path)
        got, _ = verdict_of(tmp_path, path)
        w = set() if want in ("none", "unknown") else set(want.split(","))
        g = set() if got in ("none", "unknown") else set(got.split(","))
        tp, fp, fn = tp + len(w & g), fp + len(g - w), fn + len(w - g)
        unknown += got == "unknown"
    print(f"\nsbatch check on {len(real)} real scripts: {tp} right findings, {fp} wrong, {fn} missed, "
          f"{unknown} unknown; precision {tp / max(1, tp + fp):.2f}, recall {tp / max(1, tp + fn):.2f}")
    assert len(real) >= 20 and tp >= 5 and fp == 0 and fn == 0


RANK_PRINTER = """import sys
a = sys.argv[1:]
print("node-rank", a[a.index("--node-rank") + 1], flush=True)
"""


@pytest.mark.slurm
def test_on_the_real_cluster_each_form_gives_the_ranks_the_check_says(tmp_path, slurm):
    """What bash and Slurm really do with each form: the ones found DS501 start both nodes as rank
    0, the fixed ones as 0 and 1 (the command in a variable and the heredoc node script included)."""
    printer = tmp_path / "print_rank.py"
    printer.write_text(RANK_PRINTER)
    forms = {"doc_form": ["0", "0"], "fixed_form": ["0", "1"], "var_form": ["0", "0"], "var_fixed": ["0", "1"],
             "heredoc_form": ["0", "0"], "heredoc_fixed": ["0", "1"]}
    got = {}
    for label in forms:
        text = (FIX / f"{label}.sbatch").read_text()
        assert (expected(FIX / f"{label}.sbatch") == "DS501") == (forms[label] == ["0", "0"])
        script = tmp_path / f"{label}.sbatch"
        script.write_text(text.replace("python3 -m sglang.launch_server", f"{sys.executable} {printer}"))
        out = tmp_path / f"{label}.out"
        r = slurm.run("sbatch", "--parsable", "-p", slurm.partition, "-D", str(tmp_path), "-o", str(out), str(script))
        jid = r.stdout.strip()
        end = time.monotonic() + 60
        while time.monotonic() < end and any(q.split()[0] == jid for q in slurm.queued()):
            time.sleep(0.3)
        got[label] = sorted(ln.split()[1] for ln in out.read_text().splitlines() if ln.startswith("node-rank "))
    assert got == forms

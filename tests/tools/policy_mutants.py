"""Does a fast test catch the removal of each verdict rule? For every (code, context) effect in
configs/findings.toml, run the fast tests on a copy of the tree with that one effect removed; a
mutant that passes every test is a rule no test guards.

    python3 -m tests.tools.policy_mutants            # all effects (~20 s each on 2 cores)
    python3 -m tests.tools.policy_mutants DS103      # one code
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAST = ["tests/verdict", "tests/evidence", "tests/cli", "tests/knowledge/test_knowledge.py", "tests/vllm",
        "tests/slurm/test_sbatch_check.py",
        "tests/multinode/test_group_profile.py"]
# (the wheels-marked tests in FAST are tests/vllm's preflight ones: 3 s once the wheel members are cached)
MARKS = "not ssh and not realsglang and not netns and not slurm"


def effects(text: str) -> list[tuple[str, str]]:
    out = []
    for code, body in re.findall(r"^\[(DS\d+)\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M):
        m = re.search(r"^verdict = \{(.*)\}$", body, re.M)
        for ctx in re.findall(r"(\w+) = \"\w+\"", m.group(1)) if m else []:
            out.append((code, ctx))
    return out


def without(text: str, code: str, ctx: str) -> str:
    def drop(m: re.Match) -> str:
        parts = [p for p in m.group(1).split(",") if not p.strip().startswith(ctx + " ")]
        return "verdict = {" + ",".join(parts) + "}" if any(p.strip() for p in parts) else "verdict = {}"

    head, _, rest = text.partition(f"[{code}]\n")
    body, nxt, tail = rest.partition("\n[")
    return head + f"[{code}]\n" + re.sub(r"^verdict = \{(.*)\}$", drop, body, flags=re.M) + nxt + tail


def main(argv: list[str]) -> int:
    src = (ROOT / "configs" / "findings.toml").read_text()
    todo = [(c, x) for c, x in effects(src) if not argv or c in argv]
    survivors = []
    with tempfile.TemporaryDirectory(prefix="dynspec-mutants-") as tmp:
        tree = Path(tmp) / "tree"
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
        for f in files:
            if (ROOT / f).is_file():
                (tree / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, tree / f)
        for code, ctx in todo:
            (tree / "configs" / "findings.toml").write_text(without(src, code, ctx))
            res = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", MARKS, *FAST],
                                 cwd=tree, capture_output=True, text=True,
                                 env={**__import__("os").environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")})
            caught = res.returncode != 0
            print(f"{code} {ctx:<9} {'caught' if caught else 'SURVIVED'}", flush=True)
            if not caught:
                survivors.append(f"{code}:{ctx}")
    print(f"{len(todo) - len(survivors)} of {len(todo)} rule removals caught by a fast test"
          + (f"; survivors: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

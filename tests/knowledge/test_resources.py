"""Packaged data is found through one helper (dynspec_cli/resources.py) and TOML read through one
import that works on every supported Python (issue 28): a module that finds configs/ from its own
file's place, or imports tomllib bare, works in the source tree and fails in a wheel or on 3.10."""
import re
from pathlib import Path

from dynspec_cli import resources

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dynspec_cli"
# the programs that run in the server's interpreter are stdlib-only and find nothing of ours
FOREIGN = ("engines/sglang/inspector/", "engines/sglang/probe/", "engines/vllm/inspector/", "inject/inspector_common.py",
           "inject/loadgen.py", "inject/follower.py", "inject/hostcheck.py", "inject/runstate.py", "inject/scraper.py")


def _sources():
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(PACKAGE).as_posix()
        if rel != "resources.py" and not rel.startswith(FOREIGN):
            yield rel, p.read_text(encoding="utf-8")


def test_the_source_tree_reads_its_own_tables():
    assert resources.configs() == REPO / "configs"
    assert resources.inject("loadgen.py") == PACKAGE / "inject" / "loadgen.py"
    assert resources.inject("engines/sglang/probe") == PACKAGE / "engines" / "sglang" / "probe"


def test_no_module_imports_tomllib_bare():
    bare = [rel for rel, text in _sources() if re.search(r"^\s*import tomllib\b", text, re.M)]
    assert not bare, f"import it as `from dynspec_cli.resources import tomllib` (3.10 has only tomli): {bare}"


def test_no_module_finds_shipped_data_from_its_own_place():
    found = [rel for rel, text in _sources()
             if re.search(r"__file__\)?\.resolve\(\)\.parents?\b.*(configs|inject)|/ \"configs\"|/ \"inject\"", text)]
    assert not found, f"find configs/ and inject/ with dynspec_cli.resources (a wheel has another layout): {found}"

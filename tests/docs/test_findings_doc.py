"""docs/findings.md is the registry that `dynspec explain` prints (configs/findings.toml), regenerated
and compared: the page and the command cannot drift."""
from __future__ import annotations

import subprocess
import sys

from dynspec_cli.knowledge.findings import registry
from dynspec_cli.report import findings_doc
from tests.docs.pages import DOCS, ROOT


def test_the_committed_page_is_the_generated_one():
    committed = (DOCS / "findings.md").read_text(encoding="utf-8")
    assert committed == findings_doc.page(), (
        f"docs/findings.md differs from configs/findings.toml; regenerate it: {findings_doc.COMMAND}")


def test_the_regeneration_command_writes_the_page():
    """The command CONTRIBUTING.md names, run as a user runs it, prints the page."""
    module = findings_doc.COMMAND.split(" -m ")[1].split()[0]
    r = subprocess.run([sys.executable, "-m", module], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == findings_doc.page()
    assert findings_doc.COMMAND in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_the_page_holds_every_finding_as_explain_prints_it():
    """Each code's section has the what, why and fix of the TOML file, read here as plain TOML (not
    through the registry's types), and the explain text of DS201 as `dynspec explain DS201` prints it."""
    from dynspec_cli.knowledge.tables import load_toml

    page = (DOCS / "findings.md").read_text(encoding="utf-8")
    raw = load_toml(ROOT / "configs" / "findings.toml", dict)
    assert set(raw) == set(registry()) and len(raw) >= 30
    for code, d in raw.items():
        section = page.split(f"\n### {code} {d['name']}\n", 1)[1].split("\n### ", 1)[0]
        for key in ("what", "why", "fix"):
            assert d[key] in section, (code, key)
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "explain", "DS201"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    why = r.stdout.split("Why this matters", 1)[1].split("How to fix", 1)[0]
    assert " ".join(why.split()) in " ".join(page.split())

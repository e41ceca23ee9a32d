"""The README a newcomer reads in two minutes: at most 150 lines, its first block the two commands of a
fresh machine (install and run the main job on its embedded default; run the whole test suite), and
every page it sends the reader to there, anchors included."""
from __future__ import annotations

import re
import shlex

from tests.docs.pages import DOCS, README, ROOT, fenced, pages, prose

CONTRIBUTING = ROOT / "CONTRIBUTING.md"


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150: move the rest to docs/)"


def test_the_first_block_is_install_and_demo_then_the_test_suite():
    first = fenced(README.read_text(encoding="utf-8"))[0]
    assert first.lang == "bash", first
    cmds = [shlex.split(line, comments=True) for line in first.lines]
    cmds = [c for c in cmds if c]
    assert len(cmds) == 2, cmds
    install, suite = cmds
    # a non-editable install of this checkout, then the demo that the install put on PATH
    assert install[:5] == ["python3", "-m", "pip", "install", "."] and "-e" not in install, install
    assert install[5:] == ["&&", "dynspec", "demo"], install
    assert 'dynspec = "dynspec_cli.cli.main:main"' in (ROOT / "pyproject.toml").read_text()
    assert suite == ["bash", ".ci/run"], suite
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^python3 -m pytest$", ci, re.M), "the suite runs every test (plain python3 -m pytest)"


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", prose(path.read_text(encoding="utf-8")), re.M)}


def test_slug_is_githubs():
    assert slug("`dynspec verify`: the verdict from a server log") == "dynspec-verify-the-verdict-from-a-server-log"
    assert slug("watch, stop, status, prove and gate by job id") == "watch-stop-status-prove-and-gate-by-job-id"
    assert slug("DS708 guard-adaptive-pinned") == "ds708-guard-adaptive-pinned"


def test_every_link_between_the_pages_resolves():
    broken = []
    for page in [*pages(), CONTRIBUTING]:
        for m in re.finditer(r"\]\(([^)\s]+)\)", prose(page.read_text(encoding="utf-8"))):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http(s): not checked here
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_the_readme_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if f"(docs/{p.name}" not in text]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
    assert "(CONTRIBUTING.md)" in text

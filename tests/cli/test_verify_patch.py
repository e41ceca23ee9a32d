"""`verify --patch`: the classes of the diff's behaviour hunks are the patched classes, not the
class whose hunk only logs the marker. The diff is `git diff` of a real wheel's file (sglang
0.5.12.post1 eagle_worker_v2.py: EagleDraftWorker.draft at line 339, EAGLEWorkerV2.__init__'s
signature closing at line 660, read by a person in the wheel)."""
import subprocess

from dynspec_cli.engines.sglang import diffclasses
from tests.support import wheels

VERSION = "0.5.12.post1"
LITERAL = "Dynamic speculation disable enabled"
REL = "python/sglang/srt/speculative/eagle_worker_v2.py"


def _diff(tmp_path):
    src = wheels.unpacked(VERSION) / "sglang" / "srt" / "speculative" / "eagle_worker_v2.py"
    lines = src.read_text().splitlines(keepends=True)
    a, b = tmp_path / "a" / REL, tmp_path / "b" / REL
    a.parent.mkdir(parents=True)
    b.parent.mkdir(parents=True)
    a.write_text("".join(lines))
    new = list(lines)
    new.insert(660, '        logger.info("Dynamic speculation disable enabled: threshold=%d", 5)\n')  # in EAGLEWorkerV2.__init__
    new.insert(339, "        self.skip_when_busy = True\n")  # first line of EagleDraftWorker.draft's body
    b.write_text("".join(new))
    res = subprocess.run(["git", "diff", "--no-index", "--no-prefix", f"a/{REL}", f"b/{REL}"], cwd=tmp_path,
                         capture_output=True, text=True)
    return res.stdout


def test_the_behaviour_hunks_class_from_the_diff_text(tmp_path, monkeypatch):
    text = _diff(tmp_path)
    assert text.count("\n@@ ") + text.startswith("@@") >= 2
    monkeypatch.setattr(diffclasses, "_local_package", lambda: None)  # no install here: the diff's own lines
    assert diffclasses.patched_classes(text, LITERAL) == ["EagleDraftWorker"]


def test_the_behaviour_hunks_class_from_the_installed_file(tmp_path, monkeypatch):
    text = _diff(tmp_path)
    _, pkg = wheels.copy_installed(VERSION, tmp_path / "venv")
    target = pkg / "srt" / "speculative" / "eagle_worker_v2.py"
    target.write_text((tmp_path / "b" / REL).read_text())  # the patch applied to the install
    monkeypatch.setattr(diffclasses, "_local_package", lambda: str(pkg))
    assert diffclasses.patched_classes(text, LITERAL) == ["EagleDraftWorker"]

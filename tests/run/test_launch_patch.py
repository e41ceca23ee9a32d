"""`launch --patch`: preflight judges the diff's hunks on the real installed sglang (a pip-installed
0.5.12.post1 wheel, patched), the stand-in server runs, and the run record carries the diff's path,
sha256, installed files and hunks; a missing diff is one line, exit 2."""
import hashlib
import json
from pathlib import Path

from tests.cli.test_verify_patch import REL, VERSION, _diff
from tests.run.helpers import dynspec, write_profile
from tests.support import wheels
from tests.support.home import runs_dir


def test_launch_carries_the_diff_into_the_run_record(tmp_path):
    text = _diff(tmp_path)
    py, pkg = wheels.copy_installed(VERSION, tmp_path / "venv")
    target = pkg / "srt" / "speculative" / "eagle_worker_v2.py"
    target.write_text((tmp_path / "b" / REL).read_text())
    (tmp_path / "p").mkdir()
    diff = tmp_path / "p" / "my.diff"
    diff.write_text(text)
    prof = write_profile(tmp_path / "p" / "prof.toml", "patchrun", python=py,
                         flags={"speculative-algorithm": "EAGLE",  # (this server_args.py has no threshold flag)
                                "speculative-disable-batch-threshold": None})
    # the bundled feature without its [flag]: this server_args.py is the release's own
    feat = (tmp_path / "p" / "feature.toml")
    lines = (Path(__file__).parents[2] / "configs" / "features" / "dynamic-spec-disable.toml").read_text().split("\n[")
    feat.write_text("\n[".join(x for x in lines if not x.startswith("flag]")))
    body = prof.read_text().replace("[env]", f'patch = "my.diff"\nfeature = "{feat}"\n[env]', 1)  # relative to the profile
    prof.write_text(body)
    try:
        r = dynspec("launch", str(prof), "--no-probe", "--json", "--timeout", "120")
        assert "started" in r.stdout or r.returncode in (0, 1, 3), r.stderr + r.stdout  # (the stand-in replays its own log: its verdict is not this test's)
        rec = json.loads((runs_dir() / "patchrun.json").read_text())
        assert rec["patch"]["path"] == str(diff)
        assert rec["patch"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
        assert rec["patch"]["files"] == [str(target)]
        roles = {(h["class"], h["function"]): h["role"] for h in rec["patch"]["hunks"]}
        assert roles[("EagleDraftWorker", "draft")] == "behaviour"
        assert roles[("EAGLEWorkerV2", "__init__")] == "marker"
    finally:
        dynspec("stop", "patchrun")


def test_a_profile_patch_that_is_missing_is_one_line_exit_2(tmp_path):
    prof = write_profile(tmp_path / "prof.toml", "nopatch")
    prof.write_text(prof.read_text().replace("[env]", 'patch = "gone.diff"\n[env]', 1))
    r = dynspec("launch", str(prof), "--no-preflight")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "gone.diff" in r.stderr

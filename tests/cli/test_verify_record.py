"""`dynspec verify LOG` on a log `dynspec launch --patch` wrote, on the machine that ran the launch
(a benchmark script's gate): the log's DYNSPEC-LAUNCH header names the run, its record holds the diff
as the launch's preflight judged each hunk, and verify judges with it, as launch and prove did.

The log is issue 29's case c on the H100 (tests/fixtures/logs/gpu-h100/0.5.12.post1-par, README there):
STANDALONE on sglang 0.5.12.post1, where StandaloneWorkerV2.__init__ never calls EAGLEWorkerV2.__init__
(the marker's method, standalone_worker_v2.py:136) but its draft worker inherits the patched
EagleDraftWorker.draft. prove on that server: the feature acts. Read alone, the log says the marker's
method never ran (dead); with the run's diff, the behaviour hunk ran on the scheduler (live)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h100" / "0.5.12.post1-par"
REPO = Path(__file__).resolve().parents[2]


def _header(log: Path) -> dict:
    first = log.read_text().splitlines()[0]
    assert first.startswith("DYNSPEC-LAUNCH ")
    return json.loads(first[len("DYNSPEC-LAUNCH "):])


def place_case_c(tmp_path: Path) -> tuple[Path, Path, dict]:
    """Case c's log where its launch wrote it, an empty dynspec home, and the run's record: the judged
    fields of the real record (record-mc.json) plus what the log's header says of the launch."""
    log = tmp_path / "logs" / "tiny-mc.log"
    log.parent.mkdir()
    log.write_bytes((HERE / "tiny-mc.log").read_bytes())
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)
    head = _header(log)
    rec = {**json.loads((HERE / "record-mc.json").read_text()), "host": "local", "pid": 950, "pgid": 950,
           "argv": head["argv"], "env": head["env"], "log": str(log), "port": 33000, "started_at": head["started_at"]}
    return log, home, rec


@pytest.fixture
def run(tmp_path):
    log, home, rec = place_case_c(tmp_path)

    def verify(*args: str, record: dict | None = rec):
        if record is not None:
            (home / "runs" / f"{record['name']}.json").write_text(json.dumps(record))
        r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", str(log), *args],
                           capture_output=True, text=True, timeout=120, cwd=REPO,
                           env=dict(os.environ, DYNSPEC_HOME=str(home)))
        d = json.loads(r.stdout)
        return r.returncode, d["verdict"], [f["code"] for f in d["findings"]], r.stderr
    verify.record = rec
    return verify


def test_the_runs_record_gives_verify_the_diff_and_case_c_is_live(run):
    rc, verdict, codes, err = run()
    assert (rc, verdict) == (0, "live")
    # the announcement's method is overridden (silent marker), the behaviour hunk ran: not DS211's dead
    assert "DS225" in codes and "DS211" not in codes and "DS301" not in codes
    assert "run tiny-mc's patch" in err and "gpu/patches/dynamic-spec-disable-0.5.12.post1.diff" in err


def test_without_the_record_the_log_alone_is_judged_as_before(run):
    rc, verdict, codes, err = run(record=None)
    assert (rc, verdict) == (1, "dead") and "DS211" in codes
    assert "record" not in err


def test_a_record_of_another_launch_of_the_same_name_is_not_used(run):
    """A later `dynspec launch` of the same profile rewrote the record: its start time is not the one
    in this log's header, so its diff says nothing about this log."""
    rc, verdict, codes, err = run(record={**run.record, "started_at": run.record["started_at"] + 3600})
    assert (rc, verdict) == (1, "dead") and "record" not in err


def test_a_record_without_a_diff_changes_nothing(run):
    rc, verdict, codes, err = run(record={**run.record, "patch": None})
    assert (rc, verdict) == (1, "dead") and "DS211" in codes and "record" not in err


def test_a_record_for_another_feature_is_not_used(run):
    rc, verdict, codes, err = run("--feature", "speculative-adaptive", record=run.record)
    assert "record" not in err

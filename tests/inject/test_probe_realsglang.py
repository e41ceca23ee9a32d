"""The probe inside the REAL `python -m sglang.launch_server` of published releases on this CPU-only machine
(tests.support.sglang_env: real wheels, real deps, nothing shimmed), patched like the user did
(tests.support.sglang_patch) and started with the recorder's exact cases (tests/tools/record_real_logs.py).

Each release stops where it stops without a GPU (0.5.9 at the uvicorn import in the launcher; 0.5.16 and
0.5.23 in the spawned scheduler at CUDA init, after which sglang SIGKILLs its own tree). Before that, every
real process must report through the probe, and the server's own evidence lines, stage and exit code must be
those of the same case without the probe (the committed fixture, or a live run when none is committed).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from dynspec_cli.engines.sglang.probe_setup import PREFIX, parse_probe_line, probe_env
from tests.support import sglang_env, sglang_patch
from tests.tools import record_real_logs as rec

pytestmark = pytest.mark.realsglang

CASES = {
    "0.5.9": "0.5.9/v2-unset-topk4",
    "0.5.16": "0.5.16/v2-true-topk4",
    "0.5.23": "0.5.23/v2-true-topk4",
}


def _launch(case, env: sglang_env.SglangEnv, site: Path, work: Path, targets=None) -> tuple:
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    full = env.env(extra_paths=[site], base=base, PYTHONUNBUFFERED="1")
    full.update(case.env)
    if targets is not None:
        full.update(probe_env(targets, existing_pythonpath=full["PYTHONPATH"]))
    argv = [str(env.python), *case.launcher_args()]
    with open(work / f"{case.version}-{'probe' if targets is not None else 'plain'}.out", "w+b") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full,
                                cwd=str(work), start_new_session=True)
        try:
            rc = proc.wait(timeout=rec.TIMEOUT * 2.5)
        finally:
            try:  # sglang's children outlive their parent otherwise
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return proc.pid, rc, text


def _without_probe_lines(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if PREFIX not in ln)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """version -> (record, launcher pid, exit code, text, probe records), each run once per module."""
    cache = {}

    def get(version: str):
        if version not in cache:
            work = tmp_path_factory.mktemp(f"probe-real-{version}")
            env = sglang_env.python_for(version)
            site = env.patched_copy(work / "site")
            record = sglang_patch.patch_sglang(site)
            marker = next(i for i in record.insertions if i.what == "marker")
            targets = [{"file": marker.rel, "class": record.worker_class, "function": record.function,
                        "lines": [marker.line]}]
            rec.ensure_model_dir()
            case = rec.CASES[CASES[version]]
            pid, rc, text = _launch(case, env, site, work, targets)
            records = [r for r in map(parse_probe_line, text.splitlines()) if r]
            cache[version] = (case, env, site, work, record, pid, rc, text, records)
        return cache[version]

    return get


def _by_pid(records):
    out = {}
    for r in records:
        out.setdefault(r["pid"], []).append(r)
    return out


def _one(recs, event):
    found = [r for r in recs if r["event"] == event]
    assert len(found) == 1, (event, found)
    return found[0]


@pytest.mark.parametrize("version", list(CASES))
def test_real_launcher_reports_version_path_and_resolved_server_args(version, probed):
    case, env, site, work, record, pid, rc, text, records = probed(version)
    assert records, text[-4000:]
    assert [r for r in records if r["event"] == "error"] == []
    procs = _by_pid(records)
    launcher = procs[pid]
    assert {r["role"] for r in launcher} == {"launcher"}
    assert _one(launcher, "start")["started_as"] == "module:sglang.launch_server"
    sg = _one(launcher, "sglang")
    assert sg == {**sg, "version": version, "path": str(site / "sglang"), "import_ok": True}
    sa = _one(launcher, "server_args")
    # resolved: what sglang itself logs (0.5.19+: resolved_dict()); the patched flag is among them
    assert sa["source"] == ("resolved_dict" if version == "0.5.23" else "attributes")
    assert "run_server" in sa["seen_at"]
    args = sa["args"]
    assert args["speculative_algorithm"] == "EAGLE3" and args["speculative_eagle_topk"] == 4
    assert args["speculative_num_steps"] == 3 and args["speculative_num_draft_tokens"] == 4
    assert args["speculative_disable_batch_threshold"] == 5 and args["device"] == "cuda"
    assert args["model_path"] == str(rec.MODEL_DIR)
    # 0.5.9 falls back to spec v1 for topk 4 (overlap off); 0.5.16+ keep the overlap scheduler on
    assert args["disable_overlap_schedule"] is (version == "0.5.9")
    # nothing the patch touches is imported in the launcher
    cov = [r for r in launcher if r["event"] == "coverage"]
    assert all(c["not_loaded"] == [0] for c in cov)


@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_real_scheduler_process_reports_role_rank_and_its_own_view(version, probed):
    case, env, site, work, record, pid, rc, text, records = probed(version)
    procs = _by_pid(records)
    children = {p: recs for p, recs in procs.items() if p != pid and recs[0]["ppid"] == pid}
    roles = {p: recs[-1]["role"] for p, recs in children.items()}
    started = sorted(recs[0]["started_as"] for recs in children.values())
    assert started == ["resource-tracker", "spawn-child", "spawn-child"], children
    assert sorted(roles.values())[-1] == "scheduler" and list(roles.values()).count("scheduler") == 1, roles
    # the detokenizer reaches its entry function only if sglang's SIGKILL of the tree (after the scheduler's
    # CUDA failure) comes late enough; the scheduler always does
    assert set(roles.values()) <= {"scheduler", "detokenizer", "other"}, roles
    (sched,) = [children[p] for p, r in roles.items() if r == "scheduler"]
    start = _one(sched, "start")
    assert start["started_as"] == "spawn-child" and start["role"] == "other"
    entry = _one(sched, "entry")
    assert entry["entry"] == "sglang.srt.managers.scheduler.run_scheduler_process" and entry["gpu_id"] == 0
    assert entry["rank"]["tp"] == 0 and entry["rank"]["pp"] == 0
    assert _one(sched, "sglang")["version"] == version
    sa = _one(sched, "server_args")
    assert sa["seen_at"] == "sglang.srt.managers.scheduler.run_scheduler_process"
    assert sa["args"]["speculative_disable_batch_threshold"] == 5 and sa["args"]["speculative_algorithm"] == "EAGLE3"
    assert rec.NO_DRIVER in text  # and then it died at CUDA init, before the draft worker was chosen
    assert not [r for r in sched if r["event"] == "worker"]
    for detok in [children[p] for p, r in roles.items() if r == "detokenizer"]:
        assert _one(detok, "entry")["entry"] == "sglang.srt.managers.detokenizer_manager.run_detokenizer_process"


@pytest.mark.parametrize("version", list(CASES))
def test_real_launcher_output_and_exit_unchanged_by_the_probe(version, probed):
    case, env, site, work, record, pid, rc, text, records = probed(version)
    rest = _without_probe_lines(text)
    assert PREFIX.strip() not in rest
    fixture = rec.FIXTURES / version / f"{case.name}.json"
    if fixture.is_file():
        meta = json.loads(fixture.read_text())
        plain_rc, plain_stage, plain_evidence = meta["exit_code"], meta["stage"], meta["evidence"]
    else:  # not recorded yet: the same case without the probe, live
        _, plain_rc, plain_text = _launch(case, env, site, work)
        plain_stage = rec.stage_of(plain_text, plain_rc, False)
        plain_evidence = rec.evidence_lines(plain_text)
    assert rec.stage_of(rest, rc, False) == plain_stage
    assert rc == plain_rc
    assert set(rec.evidence_lines(rest)) == set(plain_evidence)
    assert "_dynspec_probe" not in rest

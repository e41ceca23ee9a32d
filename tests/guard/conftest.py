"""Servers for the guard tests: GPU-server stand-ins launched and proven with dynspec itself, each
replaying one thing that goes wrong while a benchmark runs (STANDIN_REPLAY); and the real
sglang.bench_serving of the published 0.5.9 wheel (tests/support/bench_client.py)."""
import os
import subprocess
import uuid

import pytest

from tests.run.helpers import DYNSPEC, cleanup, record, wait_for, write_profile
from tests.support import bench_client
from tests.support.home import runs_dir

TH = 3
LIVE_ENV = {"SGLANG_ENABLE_SPEC_V2": "True"}
FLAGS = {"speculative-disable-batch-threshold": TH, "decode-log-interval": 2, "enable-metrics": True, "tp-size": 1}
ADAPTIVE_ENV = {"STANDIN_SGLANG_VERSION": "0.5.23", "STANDIN_ACCEPT_PROB": "0.9"}
SERVERS = {  # key -> (env, flags)
    "healthy": ({}, {}),
    "collapse": ({"STANDIN_REPLAY": "collapse@3"}, {}),
    "restart": ({"STANDIN_REPLAY": "restart@3"}, {}),
    "reset": ({"STANDIN_REPLAY": "reset@3"}, {}),
    "dp": ({"STANDIN_REPLAY": "rank0-silent"}, {"dp-size": 2}),
    "lossy": ({}, {"speculative-accept-threshold-single": 0.5}),  # relaxed acceptance: lossy
    # sglang 0.5.23's adaptive speculation (its controller ported into the stand-in), healthy and pinned mid-run
    "adaptive": (ADAPTIVE_ENV, {"speculative-adaptive": True}),
    "pinned": ({**ADAPTIVE_ENV, "STANDIN_REPLAY": "pin@3"}, {"speculative-adaptive": True}),
}
PROVE_STEPS = {"dp": "1,2,8,10"}  # round robin over two DP ranks: each sees half the clients


@pytest.fixture(scope="session")
def bench():
    return bench_client.client("0.5.9")


@pytest.fixture(scope="module")
def servers(tmp_path_factory, request):
    """The module's SERVERS (tests/guard/test_guard_eager.py has its own), else the ones above."""
    SERVERS = getattr(request.module, "SERVERS", globals()["SERVERS"])  # noqa: N806
    d = tmp_path_factory.mktemp("guard")
    tag = uuid.uuid4().hex[:6]
    patched = d / "eagle_worker_v2.py"
    patched.write_text("# patched: Dynamic speculation disable enabled: threshold=%d\n")
    names = {k: f"gd-{k}-{tag}" for k in SERVERS}
    replay_logs = {k: d / f"{k}.replay" for k in SERVERS}
    procs = {}
    for key, (env, flags) in SERVERS.items():
        prof = write_profile(d / f"{key}.toml", names[key],
                             env={**LIVE_ENV, "STANDIN_REPLAY_LOG": str(replay_logs[key]), **env}, flags={**FLAGS, **flags})
        procs[key] = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight", "--json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for key, p in procs.items():
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, f"{key}: {err}{out}"
        proving = {k: subprocess.Popen(DYNSPEC + ["prove", names[k], "--duration", "1", "--max-new-tokens", "24",
                                                  "--patched-file", str(patched), "--steps", PROVE_STEPS.get(k, "1,N,N+1,2N")],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in SERVERS}
        for key, p in proving.items():
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, f"prove {key}: {err}{out}"
        yield {"dir": d, "names": names, "replay": replay_logs, "patched": patched}
    finally:
        for n in names.values():
            cleanup(n)
            for f in (runs_dir() / f"{n}.receipt.json",):
                f.unlink(missing_ok=True)


def port(name: str) -> int:
    return record(name)["port"]


def arm(name: str) -> None:
    """SIGUSR1: the stand-in's replay clock starts at the next client request (the benchmark's)."""
    os.kill(record(name)["pid"], 10)

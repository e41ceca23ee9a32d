"""`dynspec prove` reports per step whether decode ran in CUDA graphs and the tokens/s there (issue 31
item 3), against the GPU-server stand-in: one server whose graphs cover every batch, one launched with
`--cuda-graph-max-bs 2`, so that (as sglang's CudaGraphRunner.can_run decides) every decode step of a
running batch above 2 runs eager; and sglang 0.5.6, whose /metrics has no cuda_graph_passes_total."""
import json
import subprocess
import uuid

import pytest

from tests.prove.test_prove import FAST, FLAGS, LIVE_ENV, forget, healthy
from tests.run.helpers import DYNSPEC, dynspec, record, wait_for, write_profile

SERVERS = {
    "graphs": (LIVE_ENV, FLAGS),
    "small": (LIVE_ENV, {**FLAGS, "cuda-graph-max-bs": 2}),
    "old": ({**LIVE_ENV, "STANDIN_SGLANG_VERSION": "0.5.6"}, FLAGS),
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("provegraphs")
    tag = uuid.uuid4().hex[:6]
    names = {k: f"pg-{k}-{tag}" for k in SERVERS}
    procs = {k: subprocess.Popen(DYNSPEC + ["launch", str(write_profile(d / f"{k}.toml", names[k], env=e, flags=f)),
                                            "--no-preflight", "--keep", "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, (e, f) in SERVERS.items()}
    try:
        for key, p in procs.items():
            out, err = p.communicate(timeout=120)
            assert p.returncode in (0, 1), f"{key}: {err}{out}"
            assert wait_for(lambda: healthy(record(names[key])["port"]), 60), f"{key} never became healthy"
        yield names
    finally:
        for n in names.values():
            forget(n)


@pytest.fixture(scope="module")
def patched(tmp_path_factory):
    p = tmp_path_factory.mktemp("patched") / "eagle_worker_v2.py"
    p.write_text("# patched: Dynamic speculation disable enabled: threshold=%d\n")
    return p


def prove(name, patched, rep):
    r = dynspec("prove", name, *FAST, "--json", "--report", str(rep), "--patched-file", str(patched), timeout=180)
    return r, json.loads(r.stdout)


def test_graph_decode_at_every_step_from_the_counter(servers, patched, tmp_path):
    r, doc = prove(servers["graphs"], patched, tmp_path / "rep")
    assert r.returncode == 0, r.stderr + r.stdout
    for s in doc["steps"]:
        cp = s["compute_path"]
        assert cp["decode"] == "graphs" and cp["source"] == "metrics" and cp["eager"] == 0 and cp["graph"] > 0, s
        assert s["tokens_per_s"] > 0 and s["output_tokens"] > 0
    assert "DS712" not in (tmp_path / "rep" / "report.html").read_text()


def test_batches_above_the_captured_size_decode_eager(servers, patched, tmp_path):
    rep = tmp_path / "rep"
    r, doc = prove(servers["small"], patched, rep)
    steps = doc["steps"]
    one = steps[0]  # one client: running batch 1 <= 2, in graphs
    assert one["concurrency"] == 1 and one["compute_path"]["decode"] == "graphs", one["compute_path"]
    top = steps[-1]  # 2N = 6 clients: batch 6 > 2 but for the drain at the end
    assert top["compute_path"]["decode"] in ("eager", "mixed") and top["compute_path"]["source"] == "metrics"
    assert top["compute_path"]["eager"] > top["compute_path"]["graph"], top["compute_path"]
    # the Decode batch lines at batch 6 say `cuda graph: False`
    assert all(d["cuda_graph"] is False for d in top["decode"] if d["running"] > 2)
    assert any(d["cuda_graph"] is True for d in one["decode"])
    # text, JSON and report.html say it, with the tokens/s of the step
    html = (rep / "report.html").read_text()
    assert "DS712 decode ran eager at" in html and f"step {top['index']} (concurrency 6" in html and "<th>decode</th>" in html and "eager" in html
    assert json.loads((rep / "prove.json").read_text())["steps"][-1]["compute_path"]["decode"] == top["compute_path"]["decode"]


def test_release_without_the_counter_is_judged_from_the_lines(servers, patched, tmp_path):
    r, doc = prove(servers["old"], patched, tmp_path / "rep")
    assert r.returncode == 0, r.stderr + r.stdout
    for s in doc["steps"]:
        cp = s["compute_path"]
        # 0.5.6's /metrics has no sglang:cuda_graph_passes_total: never from metrics, never eager
        assert cp["source"] in ("log", None) and cp["decode"] in ("graphs", "not reported"), cp
    assert "DS712" not in (tmp_path / "rep" / "report.html").read_text()

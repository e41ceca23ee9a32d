"""The GPU stand-in (fake_sglang_server.py), run as a real subprocess, and its logs judged by the real
`python -m dynspec_cli verify LOG --json`: the verdicts must be the ones the named release would earn."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.standin import fake_sglang_server as standin

STANDIN = Path(standin.__file__)
SPEC = ["--model-path", "/models/kimi-k2.5-int4", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/kimi-k2.5-eagle3", "--speculative-num-steps", "3"]
TOPK1 = ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
THRESHOLD = ["--speculative-disable-batch-threshold", "5"]
V2 = {"SGLANG_ENABLE_SPEC_V2": "True"}
READY = "The server is fired up and ready to roll!"
MARKER = re.compile(r"^\[[\d\- :]+ (TP\d+)\] Dynamic speculation disable enabled: threshold=5$", re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gone(pids, timeout: float = 10) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


class Standin:
    """One stand-in process, started like dynspec starts a server: stdout and stderr into one log file,
    in its own session (so the test can always take the whole group down)."""

    def __init__(self, tmp: Path, args: list, env: dict = None, name: str = "server", python: list = None,
                 port: int = None):
        self.log = tmp / f"{name}.log"
        self.port = port or free_port()
        e = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_") and k != "SGLANG_ENABLE_SPEC_V2"}
        e.update({"STANDIN_PACE": "0", "STANDIN_DECODE_STEP": "0.005"})
        e.update(env or {})
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen([*(python or [sys.executable]), str(STANDIN), *args, "--port", str(self.port)],
                                         stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=e,
                                         start_new_session=True)

    @property
    def text(self) -> str:
        return self.log.read_bytes().decode("utf-8", "replace")

    def wait_for(self, needle: str, timeout: float = 20) -> str:
        end = time.time() + timeout
        while time.time() < end:
            t = self.text
            if needle in t:
                return t
            if self.proc.poll() is not None:
                t = self.text
                if needle in t:
                    return t
                pytest.fail(f"stand-in exited ({self.proc.returncode}) without {needle!r}:\n{t[-3000:]}")
            time.sleep(0.05)
        pytest.fail(f"no {needle!r} within {timeout} s:\n{self.text[-3000:]}")

    def wait_exit(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout)

    def children(self) -> list:
        return standin.descendants(self.proc.pid)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str):
        try:
            with urllib.request.urlopen(self.url(path), timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for pid in self.children():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait(10)


@pytest.fixture
def launch(tmp_path):
    started = []

    def start(args, env=None, **kw):
        s = Standin(tmp_path, args, env, **kw)
        started.append(s)
        return s
    yield start
    for s in started:
        s.kill()


def verify(log: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def codes(v: dict) -> list:
    return [f["code"] for f in v["findings"]]


# --- start-up: what each release prints and what dynspec concludes ----------------------------------
def test_059_spec_v2_unset_runs_v1_no_marker_dead(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "2"])
    text = s.wait_for(READY)
    lines = text.splitlines()
    # bare (pre-logging) warnings, then the timestamped dump with the patched field
    assert lines[0] == standin.FULL_TEXTS["max-running-requests-reset"]
    assert lines[1] == standin.FULL_TEXTS["overlap-off-spec-v2-off"]
    assert lines[1].startswith(knowledge().warning_by_id["overlap-off-spec-v2-off"].text)
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] server_args=ServerArgs\(model_path='/models/kimi", lines[2])
    assert "disable_overlap_schedule=True" in lines[2] and "speculative_disable_batch_threshold=5" in lines[2]
    assert re.search(r"^\[[\d\- :]+ TP1\] Init torch distributed begin\.$", text, re.M)
    assert not MARKER.search(text)
    v = verify(s.log)
    assert v["verdict"] == "dead" and v["worker"]["class"] == "EAGLEWorker"
    assert "DS201" in codes(v) and "DS301" in codes(v)


def test_059_spec_v2_topk1_marker_on_every_rank_live(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "4"], V2)
    text = s.wait_for(READY)
    assert "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.\n" in text
    assert MARKER.findall(text) == ["TP0", "TP1", "TP2", "TP3"]
    order = [text.index(x) for x in ("server_args=ServerArgs(", "Load weight begin", "Capture cuda graph end",
                                     "type=LlamaForCausalLMEagle3", "Dynamic speculation disable", "Capture draft cuda graph",
                                     "max_total_num_tokens=", "Uvicorn running on", READY)]
    assert order == sorted(order)
    assert "\rLoading safetensors checkpoint shards: 100% Completed | 64/64 [" in text
    v = verify(s.log)
    assert v["verdict"] == "live" and v["marker"]["ranks"] == ["TP0", "TP1", "TP2", "TP3"]
    assert v["worker"]["class"] == "EAGLEWorkerV2" and v["server_ready"]


def test_059_spec_v2_topk4_raises_value_error_crashed(launch):
    s = launch(SPEC + ["--speculative-eagle-topk", "4"] + THRESHOLD, V2)
    assert s.wait_exit() == 1
    text = s.text
    assert text.rstrip().endswith("ValueError: Spec v2 currently only supports topk = 1 for speculative decoding.")
    assert "in _handle_speculative_decoding" in text and "server_args=" not in text
    v = verify(s.log)
    assert v["verdict"] == "crashed" and v["crash"]["exception"] == "ValueError"


def test_unpatched_rejects_the_feature_flag_dead(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD, dict(V2, STANDIN_PATCHED_CLASS="none"))
    assert s.wait_exit() == 2
    text = s.text
    assert text.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH")
    assert text.rstrip().splitlines()[-1] == \
        "launch_server.py: error: unrecognized arguments: --speculative-disable-batch-threshold 5"
    v = verify(s.log)
    assert v["verdict"] == "dead" and "DS101" in codes(v)


def test_patch_in_a_class_that_does_not_run_gives_no_marker(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD, dict(V2, STANDIN_PATCHED_CLASS="EAGLEWorker"))
    text = s.wait_for(READY)
    assert "speculative_disable_batch_threshold=5" in text and not MARKER.search(text)
    assert verify(s.log)["verdict"] == "dead"


def test_0523_dict_dump_v2_always_live(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "2"], {"STANDIN_SGLANG_VERSION": "0.5.23"})
    text = s.wait_for(READY)
    assert text.startswith(f"{standin.SITE}/launch_server.py:71: UserWarning: 'python -m sglang.launch_server'")
    dump = next(x for x in text.splitlines() if "server_args=" in x)
    assert re.match(r"^\[[\d\- :]+\] server_args=\{'model_path': '/models/kimi-k2.5-int4', ", dump)
    assert "'speculative_disable_batch_threshold': 5" in dump and "'disable_overlap_schedule': False" in dump
    assert "Init parallel begin." in text and "Capture target verify CUDA graph begin." in text
    assert "Spec v2" not in text and "Overlap scheduler" not in text  # 0.5.23 says nothing about spec v2
    v = verify(s.log)
    assert v["verdict"] == "live" and v["marker"]["ranks"] == ["TP0", "TP1"]
    assert "0.5.23" in v["sglang_version"]


# EAGLE3, topk 1, SGLANG_ENABLE_SPEC_V2=True: which worker runs, read from sglang's source
# (../shared/reference/sglang-internals.md, the dispatch and overlap tables, with the lines cited there)
HAND_READ = {
    "0.5.3": "dead",   # V1 only: EAGLE/EAGLE3 force disable_overlap_schedule=True (0.5.3 server_args.py:1061) -> EAGLEWorker
    "0.5.5": "live",   # the env switch keeps EAGLE3's overlap on (0.5.5 server_args.py:1539-1552) -> EAGLEWorkerV2 (spec_info.py:264-273)
    "0.5.11": "live",  # spec v2 on, topk 1 -> EAGLEWorkerV2
    "0.5.16": "live",  # V1 EAGLE workers are gone since 0.5.13: EAGLEWorkerV2 for any overlap setting
}


@pytest.mark.parametrize("version", sorted(HAND_READ))
def test_release_families_earn_the_hand_read_verdict(launch, version):
    """Across format families: live exactly where a reader of that release's source says EAGLEWorkerV2 runs."""
    s = launch(SPEC + TOPK1 + THRESHOLD, dict(V2, STANDIN_SGLANG_VERSION=version))
    text = s.wait_for(READY)
    runs_v2 = HAND_READ[version] == "live"
    assert bool(MARKER.findall(text) or re.search(r"\] Dynamic speculation disable enabled", text)) == runs_v2
    assert verify(s.log)["verdict"] == HAND_READ[version]


# --- stand-in controls ----------------------------------------------------------------------------------
@pytest.mark.parametrize("control, exception", [
    ({"STANDIN_CRASH_AT": "weights"}, "safetensors_rust.SafetensorError"),
    ({"STANDIN_OOM_AT": "cuda-graph"}, "torch.OutOfMemoryError"),
    ({"STANDIN_CRASH_AT": "draft"}, "RuntimeError"),
])
def test_crash_controls_kill_the_tree_crashed(launch, control, exception):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "2"], dict(V2, **control))
    assert s.wait_exit() == -signal.SIGKILL  # sglang's kill_process_tree ends with SIGKILL on itself
    text = s.text
    assert "Scheduler hit an exception: Traceback (most recent call last):" in text
    assert "Received sigquit from a child process. It usually means the child failed." in text
    if control.get("STANDIN_CRASH_AT") == "draft":
        assert "/sglang/srt/speculative/eagle_worker_v2.py\", line" in text
    v = verify(s.log)
    assert v["verdict"] == "crashed" and v["crash"]["exception"] == exception


def test_crash_while_serving_names_the_worker_and_event_loop(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD, dict(V2, STANDIN_CRASH_AT="serving"))
    s.wait_for(READY)
    with pytest.raises(OSError):
        s.post("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 16}})
    assert s.wait_exit() == -signal.SIGKILL
    text = s.text
    assert "in event_loop_overlap" in text and "speculative/eagle_worker_v2.py" in text
    assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in text
    assert verify(s.log)["verdict"] in ("live", "crashed")  # marker logged first; dynspec reports the crash


def test_hang_control_stops_in_the_phase(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD, dict(V2, STANDIN_HANG_AT="weights"))
    s.wait_for("Loading safetensors checkpoint shards:   0% Completed")
    time.sleep(1.0)
    assert s.proc.poll() is None and "Load weight end" not in s.text
    v = verify(s.log)
    assert v["verdict"] == "inconclusive" and v["launch"]["phase"] == "weights"


def test_bad_control_is_reported_as_the_standin(launch):
    s = launch(SPEC, {"STANDIN_CRASH_AT": "nowhere"})
    assert s.wait_exit() == 64
    assert s.text.startswith("fake_sglang_server (stand-in): STANDIN_CRASH_AT='nowhere' is not a phase")


def test_runs_on_the_stdlib_snapshot_without_dynspec(launch):
    """`python -S`: no site-packages, so dynspec cannot import and the JSON snapshot decides."""
    s = launch(SPEC + TOPK1 + THRESHOLD, V2, python=[sys.executable, "-S"])
    text = s.wait_for(READY)
    assert re.search(r"^\[[\d\- :]+\] Dynamic speculation disable enabled: threshold=5$", text, re.M)  # tp 1: no tag


# --- HTTP ----------------------------------------------------------------------------------------------
def test_http_endpoints_have_the_release_shapes(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--enable-metrics", "--decode-log-interval", "4"], V2)
    s.wait_for(READY)
    assert s.get("/health") == (200, b"") and s.get("/health_generate") == (200, b"")
    status, body = s.get("/get_model_info")
    info = json.loads(body)
    assert status == 200 and set(info) == {"model_path", "tokenizer_path", "is_generation", "preferred_sampling_params",
                                           "weight_version", "has_image_understanding", "has_audio_understanding",
                                           "model_type", "architectures"}
    out = s.post("/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 64}})
    meta = out["meta_info"]
    assert set(meta) == {"id", "finish_reason", "prompt_tokens", "weight_version", "total_retractions",
                         "completion_tokens", "cached_tokens", "e2e_latency", "spec_accept_rate", "spec_accept_length",
                         "spec_accept_token_num", "spec_draft_token_num", "spec_verify_ct", "spec_accept_histogram"}
    assert meta["completion_tokens"] == 64 and meta["finish_reason"] == {"type": "length", "length": 64}
    assert meta["spec_accept_length"] == pytest.approx(64 / meta["spec_verify_ct"]) and meta["spec_accept_length"] > 1.3
    assert len(out["output_ids"]) == 64 and out["text"]
    status, body = s.get("/server_info")
    si = json.loads(body)
    assert si["speculative_algorithm"] == "EAGLE3" and si["disable_overlap_schedule"] is False
    assert si["speculative_disable_batch_threshold"] == 5 and si["version"] == "0.5.9"
    assert si["max_total_num_tokens"] > 0 and si["internal_states"][0]["avg_spec_accept_length"] > 1.3
    assert json.loads(s.get("/get_server_info")[1])["version"] == "0.5.9"
    comp = s.post("/v1/completions", {"model": "kimi", "prompt": "Hello", "max_tokens": 5})
    assert comp["object"] == "text_completion" and comp["choices"][0]["finish_reason"] == "length"
    assert comp["usage"]["completion_tokens"] == 5 and comp["metadata"] == {"weight_version": "default"}
    status, body = s.get("/metrics")
    assert status == 200 and re.search(rb'^sglang:spec_accept_length\{model_name="/models/kimi-k2.5-int4",'
                                       rb'engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"\} ', body, re.M)
    assert s.get("/nope")[0] == 404 and s.get("/generate")[0] == 405
    text = s.text
    assert "Endpoint '/get_server_info' is deprecated and will be removed in a future version." in text
    assert re.search(r'^\[[\d\- :]+\] INFO:     127\.0\.0\.1:\d+ - "POST /v1/completions HTTP/1\.1" 200 OK$', text, re.M)


def test_health_is_503_until_ready(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD, dict(V2, STANDIN_HANG_AT="ready"))
    s.wait_for("Uvicorn running on")
    assert s.get("/health")[0] == 503 and s.get("/health_generate")[0] == 503
    assert READY not in s.text


def _burst(s: Standin, n: int, tokens: int) -> list:
    outs = []
    threads = [threading.Thread(target=lambda: outs.append(
        s.post("/generate", {"text": "x", "sampling_params": {"max_new_tokens": tokens}}))) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outs


DECODE = re.compile(r"\] Decode batch, #running-req: (\d+), #token: \d+, token usage: [\d.]+, "
                    r"(?:accept len: ([\d.]+), accept rate: [\d.]+, )?cuda graph: True, "
                    r"gen throughput \(token/s\): [\d.]+, #queue-req: \d+$", re.M)


@pytest.mark.parametrize("ignore", [False, True])
def test_decode_lines_follow_the_threshold(launch, ignore):
    env = dict(V2, STANDIN_ACCEPT_PROB="0.9", **({"STANDIN_IGNORE_THRESHOLD": "1"} if ignore else {}))
    s = launch(SPEC + TOPK1 + ["--speculative-disable-batch-threshold", "3", "--decode-log-interval", "8"], env)
    s.wait_for(READY)
    low = _burst(s, 2, 160)
    mark = len(s.text)
    high = _burst(s, 6, 160)
    before = [(int(n), float(a)) for n, a in DECODE.findall(s.text[:mark])]
    after = [(int(n), float(a)) for n, a in DECODE.findall(s.text[mark:])]
    assert before and all(n <= 2 and a > 1.3 for n, a in before)
    assert all(o["meta_info"]["spec_accept_length"] > 1.3 for o in low)
    six = [a for n, a in after if n == 6]
    assert len(six) >= 3
    if ignore:
        assert all(a > 1.3 for a in six)
    else:
        assert sum(a == 1.0 for a in six) >= 0.8 * len(six)
        assert all(o["meta_info"]["spec_accept_length"] < 1.3 for o in high)
    v = verify(s.log)
    assert v["launch"]["decode_lines"] == len(before) + len(after)
    if ignore:  # the marker logged, but speculation stayed on above the threshold: the patch did not act (issue 29)
        assert v["verdict"] == "dead" and "DS321" in [f["code"] for f in v["findings"]]
    else:
        assert v["verdict"] == "live"


def test_no_speculative_algorithm_has_no_accept_len(launch):
    s = launch(["--model-path", "/models/llama", "--decode-log-interval", "4"], V2)
    s.wait_for(READY)
    _burst(s, 2, 40)
    found = DECODE.findall(s.text)
    assert found and all(a == "" for _, a in found)
    assert verify(s.log)["verdict"] == "dead"  # speculative decoding is off: the patch cannot run


# --- processes -------------------------------------------------------------------------------------------
def _schedulers(s: Standin) -> list:
    out = []
    for pid in s.children():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def test_sigterm_drains_and_takes_the_child_tree_down(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "3"], V2)
    s.wait_for(READY)
    kids = _schedulers(s)
    assert len(kids) == 3 and all(os.getpgid(k) == s.proc.pid for k in kids)
    os.kill(s.proc.pid, signal.SIGTERM)
    assert s.wait_exit(10) == -signal.SIGKILL
    assert gone(kids)
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in s.text
    assert "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]." in s.text


def test_sigterm_during_start_up_kills_at_once_children_follow(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "2"], dict(V2, STANDIN_HANG_AT="cuda-graph"))
    s.wait_for("Capture cuda graph begin")
    kids = _schedulers(s)
    assert len(kids) == 2
    os.kill(s.proc.pid, signal.SIGTERM)
    assert s.wait_exit(10) == -signal.SIGTERM
    assert gone(kids)  # PR_SET_PDEATHSIG, like sglang's kill_itself_when_parent_died


def test_ignored_sigterm_needs_sigkill_and_survivors_need_the_group(launch):
    s = launch(SPEC + TOPK1 + THRESHOLD + ["--tp-size", "2"],
               dict(V2, STANDIN_IGNORE_SIGTERM="1", STANDIN_CHILDREN_SURVIVE_PARENT="1"))
    s.wait_for(READY)
    kids = _schedulers(s)
    os.kill(s.proc.pid, signal.SIGTERM)
    for k in kids:
        os.kill(k, signal.SIGTERM)
    time.sleep(0.8)
    assert s.proc.poll() is None and all(alive(k) for k in kids)
    os.kill(s.proc.pid, signal.SIGKILL)
    assert s.wait_exit(10) == -signal.SIGKILL
    time.sleep(0.5)
    assert all(alive(k) for k in kids)  # orphans: only a kill of the process group reaches them
    os.killpg(s.proc.pid, signal.SIGKILL)
    assert gone(kids)


def test_multi_node_rendezvous_and_wrong_address_hangs(launch):
    addr = f"127.0.0.1:{free_port()}"
    common = SPEC + TOPK1 + THRESHOLD + ["--tp-size", "2", "--nnodes", "2", "--dist-init-addr", addr]
    n0 = launch(common + ["--node-rank", "0"], V2, name="node0")
    n0.wait_for("TP0] Init torch distributed begin.")
    wrong = launch(common[:-1] + [f"127.0.0.1:{free_port()}", "--node-rank", "1"], V2, name="wrong")
    wrong.wait_for("TP1] Init torch distributed begin.")
    time.sleep(1.0)
    assert "Load weight begin" not in n0.text and "Load weight begin" not in wrong.text
    n1 = launch(common + ["--node-rank", "1"], V2, name="node1")
    n0.wait_for(READY)
    t1 = n1.wait_for("TP1] Capture draft cuda graph end")
    assert MARKER.findall(n0.text) == ["TP0"] and MARKER.findall(t1) == ["TP1"]
    assert "Uvicorn" not in n1.text and "Load weight begin" not in wrong.text
    assert n1.proc.poll() is None and wrong.proc.poll() is None
    assert verify(n0.log)["verdict"] == "live"


# --- the knowledge the stand-in uses ---------------------------------------------------------------------------
def test_snapshot_equals_dynspecs_tables():
    data = json.loads((STANDIN.parent / "fake_sglang_data.json").read_text())
    live = json.loads(json.dumps(standin.tables_from_knowledge(knowledge())))
    assert data["tables"] == live, (
        "configs/sglang and the stand-in's frozen snapshot disagree. The snapshot is what the stand-in "
        "decides from: change it (make_fake_sglang_data --tables-only) only after reading the wheel "
        "that proves the new row, never just to make this pass")


@pytest.mark.wheels
def test_server_args_part_is_read_from_the_wheels():
    from tests.standin import make_fake_sglang_data as make

    data = json.loads((STANDIN.parent / "fake_sglang_data.json").read_text())
    assert data["server_args"] == json.loads(json.dumps(make.server_args_part()))
    fields = dict(data["server_args"]["0.5.9"]["fields"])
    assert list(fields)[:3] == ["model_path", "tokenizer_path", "tokenizer_mode"]
    assert fields["disable_overlap_schedule"] == "False" and fields["decode_log_interval"] == "40"


def test_snapshot_decides_like_dynspec_on_every_release():
    k = knowledge()
    snap, live = standin.Tables(standin.tables_from_knowledge(k)), standin.Tables(standin.tables_from_knowledge(k), live=k)
    envs = [{}, {"SGLANG_ENABLE_SPEC_V2": "True"}, {"SGLANG_ENABLE_SPEC_V2": "0"}, {"SGLANG_ENABLE_SPEC_V2": "maybe"}]
    for v in k.releases:
        for algo in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH"):
            for env in envs:
                for flags in (set(), {"--enable-beta-spec"}):
                    for user_disable in (False, True):
                        for topk in (None, 1, 4):
                            for device in ("cuda", "cpu"):
                                a = snap.resolve_overlap(v, algo, env, flags, user_disable, topk, device)
                                b = live.resolve_overlap(v, algo, env, flags, user_disable, topk, device)
                                assert vars(a) == vars(b), (v, algo, env, flags, user_disable, topk, device)
            for overlap in (False, True):
                for ml in (False, True):
                    assert snap.worker(v, algo, overlap, ml) == live.worker(v, algo, overlap, ml), (v, algo, overlap, ml)
        for c in {c.name for c in k.classes}:
            assert snap.mro(v, c) == live.mro(v, c)


def test_full_texts_extend_the_tables_texts():
    k = knowledge()
    for wid, full in standin.FULL_TEXTS.items():
        row = k.warning_by_id[wid]
        if row.text is not None:
            assert full.startswith(row.text), wid
        else:
            assert re.search(row.pattern, full.format(reason="overlap schedule is disabled")), wid


# --- sglang's adaptive speculation (--speculative-adaptive) -------------------------------------------
ADAPTIVE_LINE = re.compile(r"^\[[\d\- :]+\] ((?:AdaptiveSpeculativeParams initialized|Adaptive spec params updated|"
                           r"Switch adaptive runtime state).*)$", re.M)


def _wheel_templates(version: str) -> list:
    """The adaptive f-strings of the wheel, each field as {} (adaptive_spec_params.py, eagle_worker_v2.py)."""
    import ast

    from tests.support import wheels
    from tests.tools.mine_downgrades import template_regex

    out = []
    for rel in ("sglang/srt/speculative/adaptive_spec_params.py", "sglang/srt/speculative/eagle_worker_v2.py"):
        tree = ast.parse((wheels.unpacked(version) / rel).read_bytes())
        for n in ast.walk(tree):
            if isinstance(n, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
                if "adaptive" in text.lower() or text.startswith("steps"):
                    out.append(template_regex(text))
    return out


@pytest.mark.wheels
def test_adaptive_controller_lines_are_the_wheels_and_follow_its_rule(launch):
    """Every draft accepted (STANDIN_ACCEPT_PROB=1): sglang's controller steps up from 3 through 5 to 7,
    the highest of tier 1 ([1, 3, 5, 7] in 0.5.23's DEFAULT_ADAPTIVE_CONFIG), each move an "updated"
    line then a "switch" line, in the wheel's own wording; /metrics shows the active steps."""
    s = launch(SPEC + TOPK1 + ["--speculative-adaptive", "--enable-metrics", "--decode-log-interval", "4"],
               {"STANDIN_SGLANG_VERSION": "0.5.23", "STANDIN_ACCEPT_PROB": "1"})
    s.wait_for(READY)
    _burst(s, 2, 400)
    lines = ADAPTIVE_LINE.findall(s.text)
    assert lines[0] == "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]"
    assert [ln for ln in lines if ln.startswith("Switch")] == [
        "Switch adaptive runtime state: steps 3 -> 5, draft_tokens 4 -> 6",
        "Switch adaptive runtime state: steps 5 -> 7, draft_tokens 6 -> 8"]
    assert [re.sub(r" \(ema.*", "", ln) for ln in lines if ln.startswith("Adaptive spec")] == [
        "Adaptive spec params updated: steps 3 -> 5", "Adaptive spec params updated: steps 5 -> 7"]
    # the whole message, as the wheel's f-strings write it (the init line is two f-strings joined: steps=..., ...)
    templates = _wheel_templates("0.5.23")
    for ln in lines[1:]:
        assert any(t.fullmatch(ln) for t in templates), ln
    status, body = s.get("/metrics")
    assert status == 200 and re.search(rb"^sglang:spec_num_steps\{[^}]*\} 7\.0$", body, re.M)


def test_adaptive_unsupported_falls_back_with_sglangs_line(launch):
    s = launch(["--model-path", "/models/llama", "--speculative-algorithm", "NGRAM", "--speculative-adaptive"],
               {"STANDIN_SGLANG_VERSION": "0.5.23"})
    s.wait_for(READY)
    # 0.5.23 adaptive_spec_params.py adaptive_unsupported_reason, logged by speculative_hook.py
    assert ("speculative_adaptive disabled: speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported). "
            "Falling back to static speculative params.") in s.text
    assert "AdaptiveSpeculativeParams initialized" not in s.text

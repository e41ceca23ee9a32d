"""The forms real pasted logs take (issue 12): wrappers around sglang's lines, launch commands,
and frames of tracebacks, faulthandler and py-spy dumps. Every input line below is copied from a
real excerpt in tests/fixtures/logs/issues/ (file number in the comment); the expected values are
what a person reads in it."""
import pytest

from dynspec_cli.engines.sglang import frames
from dynspec_cli import engines
from dynspec_cli.evidence.commands import CommandReader, parse_flags

SGLANG = engines.get("sglang").tables  # (whose launch_flags.toml reads the commands)
from dynspec_cli.evidence.lines import parse_message
from tests.support.logs import judge_text

WRAPPED = [
    # (physical line, message, timestamp, ranks)
    ('3|qwen  |     self.forward_thread_func_()', '    self.forward_thread_func_()', None, {}),  # 57 pm2
    ('> [2026-02-12 11:38:29 TP0 EP0] Prefill batch, #new-seq: 5', 'Prefill batch, #new-seq: 5',
     '2026-02-12 11:38:29', {"TP": 0, "EP": 0}),  # 48 Markdown quote
    ('`[2025-04-11 15:03:19 TP0] TpModelWorkerClient hit an exception: Traceback (most recent call last):',
     'TpModelWorkerClient hit an exception: Traceback (most recent call last):', '2025-04-11 15:03:19', {"TP": 0}),  # 57
    ('>  \t \t2025-03-11 09:51:41.193\tLoading safetensors checkpoint shards: 96% Completed | 156/163 [13:54<00:37, 5.32s/it]\t ',
     'Loading safetensors checkpoint shards: 96% Completed | 156/163 [13:54<00:37, 5.32s/it]\t ', None, {}),  # 64 Loki
    ('[12-16 14:27:10] Exit code: -9', 'Exit code: -9', None, {}),  # 53 short prefix
    ('2025-07-25T07:53:08.217491295+08:00 stdout F     scheduler.event_loop_normal()',
     '    scheduler.event_loop_normal()', None, {}),  # 31 CRI with an offset
    ('(WorkerDict pid=859188) RuntimeError: CUDA error: an illegal memory access was encountered',
     'RuntimeError: CUDA error: an illegal memory access was encountered', None, {}),  # 50 Ray
    ('sglang-1  | [2025-10-29 11:25:58 TP3] Watchdog timeout (self.watchdog_timeout=300)',
     'Watchdog timeout (self.watchdog_timeout=300)', '2025-10-29 11:25:58', {"TP": 3}),  # 42 compose
]


@pytest.mark.parametrize("text,msg,ts,ranks", WRAPPED, ids=[w[0][:30] for w in WRAPPED])
def test_wrappers_are_removed(text, msg, ts, ranks):
    assert parse_message(text) == (msg, ts, ranks)


def test_journald_prefix_is_removed():
    # the journald form `Mon DD HH:MM:SS host unit[pid]: ` (no public sglang excerpt had one)
    assert parse_message("Jul 10 03:06:31 gpu1 python3[1234]: [2026-07-10 03:06:32] Scheduler hit an exception: x")[0] \
        == "Scheduler hit an exception: x"


def test_launch_command_flags():
    # 46 and 47: argparse accepts --speculative-algo for --speculative-algorithm
    flags = parse_flags(" --model-path m --speculative-algo STANDALONE --speculative-draft-model-path d", SGLANG)
    assert flags == {"speculative_algorithm": "STANDALONE"}
    flags = parse_flags(" --speculative-eagle-topk=8 --tp 2 --disable-overlap-schedule --nnodes $N", SGLANG)
    assert flags == {"speculative_eagle_topk": 8, "tp_size": 2, "disable_overlap_schedule": True}


def test_launch_command_continued_over_lines():
    r = CommandReader(SGLANG)  # 63: a k8s args block
    assert r.feed("          python3 -m sglang.launch_server \\") == ("command", {})
    assert r.feed("          --tensor-parallel-size 16 \\") == ("command-cont", {"tp_size": 16})
    assert r.feed("          --nnodes 2") == ("command-cont", {"nnodes": 2})
    assert r.feed("          --nnodes 4") == ("command-cont", {"nnodes": 4})  # launch flags on their own line
    assert r.feed("          echo done") is None  # a shell line ends the command
    assert r.feed("          --trust-remote-code") is None  # no launch flag: not a command line


def test_quoted_entrypoint_warning_is_not_a_command():
    # sglang's own warning quotes the entry point (warnings.toml launch-server-entrypoint)
    r = CommandReader(SGLANG)
    assert r.feed("'python -m sglang.launch_server' is still supported, but 'sglang serve' is the recommended entrypoint.") is None
    assert r.feed("sglang serve --model-path m --speculative-algorithm NGRAM") == ("command", {"speculative_algorithm": "NGRAM"})


@pytest.mark.parametrize("path,module", [
    ("/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker.py", "eagle_worker"),  # 31
    ("eagle_worker.py", "eagle_worker"),  # 42, a py-spy frame
    ("/root/python/betelgeuse/srt/speculative/ngram_worker.py", "ngram_worker"),  # a vendored copy (36)
    ("/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_info.py", None),  # not a worker module
    ("penaltylib/orchestrator.py", None),
])
def test_worker_module_of_a_frame(path, module):
    from dynspec_cli.engines.sglang.knowledge import knowledge
    assert frames.worker_module(path, {c.module for c in knowledge().classes}) == module


def test_startup_and_loop_frames():
    assert frames.is_startup("/x/sglang/srt/managers/scheduler.py", "__init__")
    assert frames.is_startup("/x/sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py", "__init__")
    assert not frames.is_startup("/x/sglang/srt/managers/scheduler.py", "run_scheduler_process")
    assert frames.overlap_of("/x/sglang/srt/managers/scheduler.py", "event_loop_overlap") is True
    assert frames.overlap_of("", "event_loop_normal") is False
    assert frames.overlap_of("/x/sglang/srt/managers/tp_worker_overlap_thread.py", "forward_thread_func_") is True


def test_traceback_cut_then_served_is_not_a_crash():
    # a request traceback that sglang logged and survived: the server served requests after it
    log = ('[2025-04-17 16:15:33 TP0] Traceback (most recent call last):\n'
           '  File "/opt/conda/lib/python3.10/site-packages/sglang/srt/managers/scheduler.py", line 618, in event_loop_normal\n'
           '[2025-04-17 16:15:34 TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 40.00, #queue-req: 0\n')
    v = judge_text(log)
    c = v.to_json()["claims"]["crashed"]
    assert c["value"] is False and c["line"] == 3 and not v.crashed


def test_traceback_cut_at_end_is_a_crash():
    log = '  File "/sgl-workspace/sglang/python/sglang/srt/speculative/ngram_worker.py", line 225, in forward_batch_generation\n'
    v = judge_text(log)
    c = v.to_json()["claims"]
    assert c["crashed"]["value"] is True and c["crashed"]["line"] == 1
    assert c["worker"]["value"] == "NGRAMWorker" and c["speculative_algorithm"]["value"] == "NGRAM"


def test_frames_outweigh_the_tables():
    # The 0.5.11-0.5.13 'Spec v1 is used' warning points the tables at EAGLEWorker; a frame of
    # eagle_worker_v2.py proves EAGLEWorkerV2's code ran, so a patch there is not called dead.
    log = ('[2026-02-27 19:49:17] Spec v1 is used for eagle/eagle3/standalone speculative decoding because SGLANG_ENABLE_SPEC_V2 is not set.\n'
           '  File "/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker_v2.py", line 662, in forward_batch_generation\n')
    v = judge_text(log)
    assert v.worker["class"] == "EAGLEWorkerV2" and "DS201" not in [f.code for f in v.findings]


def test_non_overlap_spec_v2_wording():
    # 0.5.13+ (warnings.toml non-overlap-spec-v2, checked against the wheels): with
    # --disable-overlap-schedule the V2 worker runs synchronously; there is no V1 worker any more.
    v = judge_text("[2026-07-01 10:00:00] Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.\n")
    assert v.overlap_schedule is False
    assert v.worker["class"] == "EAGLEWorkerV2" and "EAGLEWorker" not in v.worker["candidates"]
    assert v.to_json()["claims"]["worker"]["line"] == 1


def test_dynspec_launch_header_is_requested_next_to_the_dump():
    # what dynspec started (its DYNSPEC-LAUNCH argv) next to what sglang resolved
    head = ('DYNSPEC-LAUNCH {"name": "seed", "argv": ["python3", "-m", "sglang.launch_server", "--speculative-algorithm", '
            '"EAGLE", "--speculative-eagle-topk", "4"], "env": {}, "started_at": 1.0}')
    dump = "[2026-02-27 19:49:17] server_args=ServerArgs(speculative_algorithm='EAGLE3', speculative_eagle_topk=4)"
    req = judge_text(head + "\n" + dump + "\n").to_json()["requested"]
    assert req["line"] == 1
    assert req["flags"]["speculative_algorithm"] == {"requested": "EAGLE", "requested_line": 1,
                                                     "effective": "EAGLE3", "effective_line": 2}
    assert req["flags"]["speculative_eagle_topk"]["effective"] == 4

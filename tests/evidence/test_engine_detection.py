"""`--engine auto` (issue 19 c): sglang's frames and file names outweigh the shape of vLLM's
`LEVEL mm-dd hh:mm:ss [file.py:N]` prefix, which older sglang builds and custom logging configs
write too; vLLM's own lines still make a vLLM log. The lines are fixture 57's (sglang #5284) and
fixture 14's (vLLM speculators #149) with the prefix shape put on them."""
from dynspec_cli import engines
from tests.support.logs import judge_text

SGLANG_PREFIXED = [
    "ERROR 04-11 15:03:19 [tp_worker_overlap_thread.py:112] TpModelWorkerClient hit an exception: Traceback (most recent call last):",
    'ERROR 04-11 15:03:19 [tp_worker_overlap_thread.py:112]   File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/tp_worker_overlap_thread.py", line 112, in forward_thread_func',
    "ERROR 04-11 15:03:19 [tp_worker_overlap_thread.py:112]     self.forward_thread_func_()",
]


def _engine(lines: list[str]) -> str:
    return engines.detect(lines)


def test_sglang_files_in_the_prefix_outweigh_its_shape():
    assert _engine(SGLANG_PREFIXED) == "sglang"
    assert _engine(SGLANG_PREFIXED[1:]) == "sglang"  # the frame alone: a file under sglang/srt/
    generic = [line.replace("tp_worker_overlap_thread.py:112", "utils.py:55") for line in SGLANG_PREFIXED]
    assert _engine(generic) == "sglang"  # the prefix names no sglang file, the frame is under sglang/srt/
    assert _engine([generic[0], generic[2]]) == "vllm"  # nothing sglang's left: two vLLM-shaped lines


def test_the_sglang_judge_reads_lines_with_that_prefix():
    v = judge_text("\n".join(SGLANG_PREFIXED) + "\n").to_json()
    c = v["claims"]
    assert c["crashed"]["value"] is True and c["crashed"]["line"] == 1  # TpModelWorkerClient hit an exception
    assert v["overlap_schedule"] is True  # tp_worker_overlap_thread: the overlap scheduler's thread


def test_vllm_lines_still_win():
    vllm = ["(Worker_TP1 pid=134175) ERROR 10-13 21:41:36 [multiproc_executor.py:671] WorkerProc hit an exception.",
            "(Worker_TP1 pid=134175) ERROR 10-13 21:41:36 [multiproc_executor.py:671] Traceback (most recent call last):"]
    assert _engine(vllm) == "vllm"
    assert _engine(["ERROR 10-13 21:41:36 [multiproc_executor.py:671] WorkerProc hit an exception.",
                    "ERROR 10-13 21:41:36 [multiproc_executor.py:671] Traceback (most recent call last):"]) == "vllm"

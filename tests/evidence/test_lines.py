import pytest

from dynspec_cli.evidence.lines import lines_of


@pytest.mark.parametrize("raw, msg, ranks", [
    (b"[2026-02-27 19:49:17] WARNING server_args.py:2386: Overlap scheduler is disabled", "Overlap scheduler is disabled", {}),
    (b"[2026-02-27 19:49:17.123 DP1 TP3 EP3] Load weight begin.", "Load weight begin.", {"DP": 1, "TP": 3, "EP": 3}),
    (b"Overlap scheduler is disabled when spec v2 is off", "Overlap scheduler is disabled when spec v2 is off", {}),
    (b"llm0-1  | [2026-02-27 19:49:17 TP0] Decode batch, #running-req: 3", "Decode batch, #running-req: 3", {"TP": 0}),
    (b"2026-02-27T19:49:17.123456789Z stderr F [2026-02-27 19:49:17] The server is fired up", "The server is fired up", {}),
    (b"(SglEngine pid=12651) [2026-02-27 19:49:17 TP1] Init torch distributed begin.", "Init torch distributed begin.", {"TP": 1}),
    (b"WARNING:sglang.srt.server_args:Max running requests is reset", "Max running requests is reset", {}),
    (b"\x1b[33m[2026-02-27 19:49:17] msg with colour\x1b[0m\r\n", "msg with colour", {}),
    (b"[2026-02-27 19:49:17] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK", "127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK", {}),
])
def test_prefixes_and_wrappers_are_removed(raw, msg, ranks):
    (line,) = lines_of(raw, 7, 100)
    assert line.msg == msg
    assert line.ranks == ranks
    assert (line.no, line.offset) == (7, 100)


def test_tqdm_fragments_glued_with_cr_become_separate_messages():
    raw = b"Loading safetensors checkpoint shards:  50% Completed | 1/2\r[2026-02-27 19:49:17] The server is fired up and ready to roll!"
    msgs = [l.msg for l in lines_of(raw, 1, 0)]
    assert msgs == ["Loading safetensors checkpoint shards:  50% Completed | 1/2", "The server is fired up and ready to roll!"]


def test_invalid_utf8_is_replaced_not_fatal():
    (line,) = lines_of(b"[2026-02-27 19:49:17] caf\xe9 \xff\xfe", 1, 0)
    assert line.msg.startswith("caf") and "\ufffd" in line.msg


def test_a_pipe_inside_a_message_is_not_a_compose_wrapper():
    (line,) = lines_of(b"Loading safetensors checkpoint shards: 100% Completed | 2/2", 1, 0)
    assert line.msg.startswith("Loading safetensors")

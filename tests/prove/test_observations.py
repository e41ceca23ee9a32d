"""A step's log slice read with dynspec's own evidence code: Decode batch lines of several
releases' formats (with rank tags, wrappers, with and without accept len / accept rate), probe
hit lines, byte offsets; and which lines are steady enough to judge."""
import json

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.prove.observations import LogReader, from_samples

PROBE = "DYNSPEC-PROBE "
LOG = "\n".join([
    "[2026-01-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 20, token usage: 0.00, accept len: 2.50, "
    "cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0, ",  # 0.5.3
    "[2026-01-01 10:00:01 DP0 TP0] Decode batch [120], #running-req: 1, #token: 40, token usage: 0.00, "
    "accept len: 2.75, accept rate: 0.58, cuda graph: True, gen throughput (token/s): 12.00, #queue-req: 0, ",  # 0.5.4
    "svc-1  | [2026-01-01 10:00:02 TP0] Decode batch, #running-req: 6, #token: 90, token usage: 0.01, "
    "accept len: 1.00, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 50.00, #queue-req: 0",  # compose
    "[2026-01-01 10:00:03] INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK",
    "[2026-01-01 10:00:03 TP0] Decode batch, #running-req: 6, #token: 95, token usage: 0.01, cuda graph: True, "
    "gen throughput (token/s): 50.00, #queue-req: 0",  # no speculative algorithm
    PROBE + json.dumps({"v": 1, "event": "hit", "function": "EAGLEWorkerV2.forward_batch_generation", "calls": 1}),
    PROBE + json.dumps({"v": 1, "event": "hit", "function": "EAGLEWorkerV2.forward_batch_generation", "calls": ">=1000"}),
    PROBE + json.dumps({"v": 1, "event": "start", "ok": True}),
    "[2026-01-01 10:00:04 TP0] Decode batch, #running-req: 6, #token: 99",  # last line, no newline
])


def test_decode_and_probe_lines_are_read_with_dynspecs_parser():
    base = 1000
    sl = LogReader(load_feature(None)).read(LOG.encode(), base)
    assert [(d.running, d.accept_len) for d in sl.decode] == [(1, 2.5), (1, 2.75), (6, 1.0), (6, None), (6, None)]
    assert sl.decode[1].accept_rate == 0.58 and sl.decode[0].accept_rate is None
    assert [d.stable for d in sl.decode] == [False, True, False, True, True]
    assert sl.decode[0].offset == base and sl.decode[1].offset == base + len(LOG.split("\n")[0]) + 1
    assert sl.probe_lines == 3
    assert sl.probe_hits == {"EAGLEWorkerV2.forward_batch_generation": ">=1000"}
    assert sl.bytes_read == len(LOG.encode())


def test_metrics_samples_stand_in_for_missing_log_lines():
    ds = from_samples([[1.0, 4.0, 2.5], [1.5, 4.0, 2.4], [2.0, 0.0, 0.0], [2.5, 7.0, 1.0]])
    assert [(d.running, d.accept_len, d.source) for d in ds] == [(4, 2.5, "metrics"), (4, 2.4, "metrics"), (7, 1.0, "metrics")]
    assert [d.stable for d in ds] == [False, True, False]

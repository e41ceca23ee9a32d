"""Any bytes give a valid verdict and no exception (hypothesis)."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.logs import MARKER, READY, judge_text, warning_text

FRAGMENTS = [
    warning_text("overlap-off-spec-v2-off"), warning_text("spec-v2-on"), warning_text("max-running-requests-reset"),
    "server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE3', tp_size=2, disable_overlap_schedule=",
    "server_args={'speculative_algorithm': None", MARKER, READY, "Traceback (most recent call last):",
    "ValueError: x", '  File "/x/sglang/srt/speculative/eagle_worker_v2.py", line 1, in f',
    "[2026-02-27 19:49:17 TP0] ", "Decode batch, #running-req: 3, accept len: 2.10, ", "\r", "\n", "\x1b[31m",
    "unrecognized arguments: --speculative-disable-batch-threshold", "\xff", "Killed",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_random_bytes(data):
    v = judge_text(data)
    assert v.verdict in ("live", "dead", "inconclusive", "crashed")
    assert v.exit_code in (0, 1, 3, 4)
    v.to_json()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=40), max_size=40))
def test_shuffled_real_fragments(parts):
    text = "".join(p if i % 3 else p + "\n" for i, p in enumerate(parts))
    v = judge_text(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    doc = v.to_json()
    assert doc["verdict"] != "live" or doc["marker"]["found"]  # never live without the marker
    assert (doc["crash"] is None) or isinstance(doc["crash"]["exception"], str)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30), st.data())
def test_nul_runs_anywhere_in_any_chunking_are_judged_as_absent(parts, draw):
    """A log with NUL runs (an emptied log's hole, a zeroed block) gives the verdict of the same log
    without them, however the bytes arrive; offsets still count the NULs."""
    from dynspec_cli import engines
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.verdict.pipeline import Pipeline

    clean = "".join(p if i % 3 else p + "\n" for i, p in enumerate(parts)).encode("utf-8", "surrogatepass")
    holed = bytearray(clean)
    for _ in range(draw.draw(st.integers(0, 4))):
        at = draw.draw(st.integers(0, len(holed)))
        holed[at:at] = b"\x00" * draw.draw(st.integers(1, 3000))
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(holed)), max_size=6)))
    p = Pipeline(load_feature(None), engine=engines.get("sglang"))
    for a, b in zip([0, *cuts], [*cuts, len(holed)]):
        p.feed(bytes(holed[a:b]))
    assert p.consumed == len(holed)
    got, want = p.final().to_json(), judge_text(clean).to_json()
    for doc in (got, want):
        doc["launch"].pop("first_offset", None)
    assert got == want

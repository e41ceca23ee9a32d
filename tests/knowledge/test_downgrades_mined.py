"""Every log call of every sglang release that says a speculative or overlap option is disabled,
ignored, removed, overridden or falling back is accounted for: a warnings.toml row (what the line
proves), a feature's `dead_when`, or a reviewed-and-irrelevant row of warnings_reviewed.toml.

The calls are mined from the real wheels by tests/tools/mine_downgrades.py (ast, never imported);
a new release that adds such a call fails here until someone decides what it means. Warm (results
cached beside the wheels) this module takes a few seconds; cold, ~10 s of parsing per release.
"""
from __future__ import annotations

import concurrent.futures
import os

import pytest

from dynspec_cli.knowledge import features
from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.support import wheels
from tests.tools import mine_downgrades as mine

pytestmark = pytest.mark.wheels

K = knowledge()
FEATURES = [features.load_feature(n) for n in features.available()]
REVIEWED = mine.reviewed_calls()


def _mine_all() -> dict[str, list[mine.Call]]:
    for v in K.releases:
        wheels.unpacked(v)  # download and unpack here, not in the workers
    n = min(2, os.cpu_count() or 1)
    with concurrent.futures.ProcessPoolExecutor(n) as ex:  # contiguous releases share most files
        return dict(zip(K.releases, ex.map(mine.mine, K.releases, chunksize=-(-len(K.releases) // n))))


@pytest.fixture(scope="module")
def mined() -> dict[str, list[mine.Call]]:
    return _mine_all()


@pytest.mark.parametrize("version", K.releases)
def test_every_downgrade_call_is_accounted_for(mined, version):
    unhandled = [c for c in mined[version] if mine.accounted_by(version, c, K, REVIEWED, FEATURES) is None]
    assert not unhandled, "\n".join(
        f"{c.file}:{c.line} {c.func}({c.text!r}) if {c.condition}: add a warnings.toml row or review it "
        f"in configs/sglang/warnings_reviewed.toml" for c in unhandled)


def test_reviewed_rows_are_still_found(mined):
    """A reviewed row that no release logs any more is stale (its text or file was mistyped)."""
    found = {(c.file, c.text) for calls in mined.values() for c in calls}
    stale = [f"{r.file}: {r.text!r}" for r in REVIEWED if (r.file, r.text) not in found]
    assert not stale, stale


def test_reviewed_rows_have_reasons():
    assert REVIEWED and all(len(r.reason) > 20 for r in REVIEWED)
    assert len({(r.file, r.text) for r in REVIEWED}) == len(REVIEWED)


# --- what the miner finds, checked against calls read by hand in the wheels ------------------
def _find(mined, version: str, file: str, needle: str) -> mine.Call:
    hits = [c for c in mined[version] if c.file == file and needle in c.text]
    assert len(hits) == 1, hits
    return hits[0]


def test_finds_the_adaptive_fallback_with_its_condition(mined):
    # 0.5.23 arg_groups/speculative_hook.py _maybe_disable_adaptive:
    #     reason = adaptive_unsupported_reason(server_args)
    #     if reason is not None:
    #         logger.warning(f"speculative_adaptive disabled: {reason}. " "Falling back to static speculative params.")
    c = _find(mined, "0.5.23", "sglang/srt/arg_groups/speculative_hook.py", "speculative_adaptive disabled")
    assert c.text == "speculative_adaptive disabled: {reason}. Falling back to static speculative params."
    assert c.template == "speculative_adaptive disabled: {}. Falling back to static speculative params."
    assert c.condition == "reason is not None" and c.func == "logger.warning"
    # 0.5.11 logs it from ServerArgs itself (server_args.py `if reason is not None:` inside
    # `if self.speculative_adaptive:`).
    c = _find(mined, "0.5.11", "sglang/srt/server_args.py", "speculative_adaptive disabled")
    assert c.condition.endswith("reason is not None")


def test_finds_the_spec_v2_overlap_line_of_0_5_8(mined):
    # 0.5.8 server_args.py: `if self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):`
    # then `if not (... envs.SGLANG_ENABLE_SPEC_V2.get()):` logs the overlap-off line.
    c = _find(mined, "0.5.8", "sglang/srt/server_args.py", "Overlap scheduler is disabled when spec v2 is off")
    assert "SGLANG_ENABLE_SPEC_V2" in c.condition and "speculative_algorithm" in c.condition
    assert mine.accounted_by("0.5.8", c, K, REVIEWED, FEATURES) == "warnings.toml:overlap-off-spec-v2-off"


def test_percent_messages_and_names_are_read():
    src = b'''
def f(server_args):
    msg = "Overlap schedule is disabled because %s" % why
    if server_args.x:
        logger.warning(msg)
    else:
        logger.info("Speculative %s is ignored here", name)
    print("nothing to see")
'''
    calls = mine.calls_in_source("sglang/srt/x.py", src)
    assert [(c.line, c.template, c.condition) for c in calls] == [
        (5, "Overlap schedule is disabled because {}", "server_args.x"),
        (7, "Speculative {} is ignored here", "not (server_args.x)"),
    ]


def test_an_unknown_downgrade_is_unhandled():
    call = mine.Call("sglang/srt/new.py", 1, "logger.warning", "Overlap scheduler is disabled for a new reason.",
                     "Overlap scheduler is disabled for a new reason.", None)
    assert mine.accounted_by("0.5.23", call, K, REVIEWED, FEATURES) is None

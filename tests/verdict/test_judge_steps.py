"""Judge.verdict is a sequence of named steps over one `Judging`; each can be exercised alone."""
from dynspec_cli import engines
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang.knowledge import knowledge
from dynspec_cli.engines.sglang.judge import Judge, Judging
from dynspec_cli.verdict.pipeline import Pipeline

SEED_WARNING = ("Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
                "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. \n")
CRASH = ("Traceback (most recent call last):\n  File \"/x/sglang/srt/managers/scheduler.py\", line 1, in run\n"
         "RuntimeError: boom\n")


def judging(text: str, **kw) -> tuple[Judge, Judging]:
    p = Pipeline(load_feature(None), engine=engines.get("sglang"), **kw)
    p.feed(text.encode())
    p.flush()
    return p.judge, Judging(p.judge.launches[-1])


def test_step_release_narrows_to_the_releases_that_print_the_line():
    judge, j = judging(SEED_WARNING)
    judge.step_release(j)
    assert j.version_text == "0.5.7 – 0.5.10.post1"  # the bare V1 warning's text is used by these releases only


def test_step_release_pinned_to_an_unknown_release_withholds_conclusions():
    judge, j = judging(SEED_WARNING, version="0.9.99")
    judge.step_release(j)
    assert j.mask == 0 and [f.code for f in j.findings] == ["DS307"]


def test_step_crash_is_final_only_at_the_end_or_after_a_quiet_second():
    judge, j = judging(CRASH)
    j.at_eof, j.quiet_for = False, 0.2
    judge.step_crash(j)
    assert j.crash["exception"] == "RuntimeError" and not j.crashed  # more lines may still come
    judge, j = judging(CRASH)
    j.at_eof, j.quiet_for = False, 1.5
    judge.step_crash(j)
    assert j.crashed and [f.code for f in j.findings] == ["DS303"]


def test_step_decide_follows_the_registry():
    judge, j = judging(SEED_WARNING)
    j.add("DS303", "RuntimeError: boom")
    judge.decide(j)  # (the judge core's decision, verdict/core.py)
    assert j.verdict == "crashed"
    j.add("DS201", "this launch runs EAGLEWorker")
    judge.decide(j)
    assert j.verdict == "dead"  # dead outranks crashed


def test_the_steps_run_in_order_in_verdict():
    judge, _ = judging(SEED_WARNING)
    v = judge.verdict(at_eof=True)
    assert v.verdict == "dead" and v.worker["class"] == "EAGLEWorker"
    assert isinstance(Judge(knowledge(), load_feature(None)).verdict(), type(v))

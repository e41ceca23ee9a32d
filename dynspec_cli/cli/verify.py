"""`dynspec verify LOG`: the verdict from a log file, once or while it grows. Benchmark scripts run
it before every benchmark, so nothing here loads typer or rich unless a terminal is shown."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from dynspec_cli.evidence.rules import Classifier
from dynspec_cli.evidence.scan import Feeder, feed_file, open_log
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.sglang import knowledge
from dynspec_cli.verdict.judge import Judge, Verdict


def make_feeder(feature: Feature, patched: list[str] | None, version: str | None, engine: str = "sglang") -> Feeder:
    if engine != "sglang":  # another engine's knowledge, classifier and judge (dynspec_cli/engines)
        from dynspec_cli import engines

        e = engines.get(engine)
        return Feeder(e.classifier(feature), e.judge(feature, patched, version))
    k = knowledge()
    return Feeder(Classifier(k, feature), Judge(k, feature, patched_classes=patched, sglang_version=version))


def verify_file(path: str, feature: Feature, patched: list[str] | None, version: str | None,
                engine: str = "sglang") -> Verdict:
    from dynspec_cli.evidence.bigfile import judge_big_file, BIG

    with open_log(path) as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size >= BIG:
            return judge_big_file(fh, size, make_feeder(feature, patched, version, engine))
        feeder = make_feeder(feature, patched, version, engine)
        feed_file(fh, feeder)
        feeder.flush()
        return feeder.judge.verdict(at_eof=True)


def follow_file(path: str, feature: Feature, patched: list[str] | None, version: str | None, *,
                timeout: Optional[float], on_update: Callable[[Verdict], None] | None = None,
                events=None, engine: str = "sglang") -> Verdict:
    """Judge `path` as it grows; return as soon as the verdict is decided (or at `timeout`).
    `events` replaces following the file with any Event iterator."""
    from dynspec_cli.run.stream import judge_stream

    feeder = make_feeder(feature, patched, version, engine)
    if events is None:
        open_log(path).close()  # bad input fails now, with exit 2
        from dynspec_cli.transport.local import LocalHost

        events = LocalHost().follow(path, 0)
    verdict, _why = judge_stream(events, feeder, timeout=timeout, on_update=on_update)
    return verdict


def run_verify(log: str, *, json_out: bool = False, follow: bool = False, timeout: Optional[float] = None,
               feature: Optional[str] = None, patched_class: Optional[Sequence[str]] = None,
               sglang_version: Optional[str] = None, engine: Optional[str] = None,
               engine_version: Optional[str] = None) -> int:
    """The whole command: judge, print the report (or JSON), return the exit code."""
    from dynspec_cli.cli.errors import UsageError, known_errors, report
    from dynspec_cli.knowledge.features import load_feature

    patched = list(patched_class) if patched_class else None
    try:
        feat = load_feature(feature)
        if timeout is not None and timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        from dynspec_cli import engines

        try:
            name = engines.resolve(engine, log, feat)
        except engines.EngineError as e:
            raise UsageError(f"--engine: {e}") from None
        version = engine_version or sglang_version
        if follow:
            v = follow_file(log, feat, patched, version, timeout=timeout, engine=name)
        else:
            v = verify_file(log, feat, patched, version, engine=name)
    except known_errors() as e:
        return report(str(e))
    doc = v.to_json()
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(doc)
    else:
        from dynspec_cli.report.console import render_verdict

        render_verdict(doc, source=log)
    return v.exit_code

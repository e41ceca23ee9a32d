"""`dynspec verify LOG`: the verdict from a log file, once or while it grows. Benchmark scripts run
it before every benchmark, so nothing here loads typer or rich unless a terminal is shown."""
from __future__ import annotations

from typing import Optional, Sequence


def run_verify(log: str, *, json_out: bool = False, follow: bool = False, timeout: Optional[float] = None,
               feature: Optional[str] = None, patched_class: Optional[Sequence[str]] = None, patch: Optional[str] = None,
               sglang_version: Optional[str] = None, engine: Optional[str] = None,
               engine_version: Optional[str] = None) -> int:
    """The whole command: judge, print the report (or JSON), return the exit code."""
    import gc

    # Loading dynspec makes ~20k long-lived objects and no garbage cycles: the collector, which
    # walks them again and again while they are made, waits until the judging starts (gc.freeze
    # then keeps it off them). About 4 ms of every `verify`.
    gc.disable()
    from dynspec_cli.cli import checks
    from dynspec_cli.cli.errors import UsageError, known_errors, report
    from dynspec_cli.knowledge.features import load_feature

    patched = list(patched_class) if patched_class else None
    diff = None  # the diff given, for the engine's judge to place each hunk against the worker the log shows
    try:
        from dynspec_cli import engines

        feat = load_feature(feature)
        engines.of(feat)  # what in the feature only its engine checks (a [plugin] section): exit 2 now
        if patch is None:
            from dynspec_cli.knowledge.features import patch_file

            patch = patch_file(feat)
        # a release pinned with the engine's own option (--sglang-version) is checked by that engine
        sglang_version = checks.release("sglang_version", sglang_version, "--sglang-version")
        if timeout is not None and timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        from dynspec_cli.verdict import pipeline

        from dynspec_cli.evidence.scan import open_stream

        source = open_stream(log)  # `-`, a pipe, a FIFO, a terminal: read once, as it comes
        if source is not None and source.tty and not follow:
            import sys

            sys.stderr.write("dynspec: reading the log from the terminal; end it with Ctrl-D\n")
        try:  # (following, the engine is told by what the first second brings, as for a file)
            head = source.peek(1.0 if follow else None) if source is not None else None
            name = engines.resolve(engine, log, feat, head=head)
        except engines.EngineError as e:
            raise UsageError(f"--engine: {e}") from None
        eng = engines.get(name)
        if patch is not None:  # the diff's behaviour hunks name the patched classes (as the engine reads them)
            from dynspec_cli.run import patchfile

            text = patchfile.read(patch)[1]
            classes = eng.patched_classes(text, feat.marker.literal)
            patched = list(dict.fromkeys((patched or []) + classes)) or patched
            diff = {"text": text}
        pins = {"sglang_version": sglang_version}  # the engines' own options, by the key of their release
        version = pins.get(eng.version_key) if eng.version_key else engine_version
        if patch is None and patched is None and source is None:
            found = _launch_record(log, feat.name, name)
            if found is not None:
                import sys

                rec, diff = found
                patched = list(rec.patched_class) or None
                version = version or (rec.sglang_version if eng.version_key == "sglang_version" else None)
                where = (rec.patch or {}).get("path") or "its diff"
                sys.stderr.write(f"dynspec: judging with run {rec.name}'s patch ({where}), from its record\n")
        gc.freeze()
        gc.enable()
        if source is not None:
            judge = pipeline.judge_growing if follow else pipeline.judge_file
            kw = {"timeout": timeout} if follow else {}
            v = judge(log, feat, patched, version, engine=eng, source=source, diff=diff, **kw)
        elif follow:
            import os

            if not json_out and not os.path.exists(log) and os.path.isdir(os.path.dirname(log) or "."):
                import sys

                sys.stderr.write(f"dynspec: {log} does not exist yet; waiting for it to appear\n")
            v = pipeline.judge_growing(log, feat, patched, version, timeout=timeout, engine=eng, diff=diff)
        else:
            v = pipeline.judge_file(log, feat, patched, version, engine=eng, diff=diff)
    except known_errors() as e:
        return report(str(e))
    doc = v.to_json()
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(doc)
    else:
        from dynspec_cli.report.console import render_verdict

        render_verdict(doc, source="standard input" if log == "-" else log)
    return v.exit_code


def _launch_record(log: str, feature: str, engine: str):
    """The run record of the `dynspec launch --patch` that wrote `log` and its diff (pipeline.record_diff),
    when this machine holds it and it recorded one; else None. A benchmark script's gate verifies the log on the machine that ran the
    launch: the record holds the diff as the launch's preflight judged each hunk, so verify agrees with
    launch and prove without being given --patch again. Records (and what they import) are loaded only
    for a log that opens with a launch header."""
    from dynspec_cli.evidence.observation import launch_header

    header = launch_header(log)
    if header is None:
        return None
    from dynspec_cli.run import records
    from dynspec_cli.verdict.pipeline import record_diff

    rec = records.of_launch(header)
    if rec is None or rec.feature != feature or rec.engine != engine:
        return None
    diff = record_diff(rec)
    return None if diff is None else (rec, diff)

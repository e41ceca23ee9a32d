"""`dynspec preflight`: before launch, which worker class will run and whether the patched code is
on its path. Like verify, it runs without typer when given in its usual form (cli/main.py)."""
from __future__ import annotations

from typing import Optional, Sequence


def run_preflight(profile: Optional[str] = None, extra: Sequence[str] = (), *, host: Optional[str] = None,
                  python: Optional[str] = None, env: Optional[Sequence[str]] = None, feature: Optional[str] = None,
                  patch: Optional[str] = None, patched_class: Optional[Sequence[str]] = None, dynamic: bool = False,
                  json_out: bool = False, ssh_config: Optional[str] = None, known_hosts: Optional[str] = None,
                  accept_new_host_key: bool = False, sbatch: Optional[str] = None) -> int:
    """The whole command: inspect, judge, print the report (or JSON), return the exit code.
    `extra` are the sglang server flags (what follows `--`)."""
    if sbatch is not None:  # the user's own sbatch script (run/sbatch_check.py)
        from dynspec_cli.run.sbatch_check import run_check

        return run_check(sbatch, json_out=json_out)
    from dynspec_cli.cli import runs
    from dynspec_cli.cli.errors import UsageError, known_errors, report
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run.profiles import load_profile, with_overrides
    from dynspec_cli.verdict import preflight as pf

    extra = list(extra)
    patched = list(patched_class) if patched_class else None
    try:
        if profile is not None and profile.startswith("--"):  # typer's reading of `preflight -- --flag ...`
            extra.insert(0, profile)
            profile = None
        if profile is not None:
            prof = with_overrides(load_profile(profile), host=host, env=list(env) if env else None)
            flags = prof.argv()[3:] + extra
            target_spec, py, env_map = prof.host, python or prof.python, dict(prof.env)
            feat = load_feature(feature or prof.feature)
            classes = patched or prof.patched_class or None
        else:
            target_spec, py, feat, classes = host or "local", python or "python3", load_feature(feature), patched
            env_map = {}
            for item in env or []:
                k, eq, v = item.partition("=")
                if not eq or not k:
                    raise UsageError(f"--env {item!r}: expected NAME=VALUE")
                env_map[k] = v
            flags = extra
        diff = None
        if patch is not None:
            try:
                with open(patch, encoding="utf-8") as fh:
                    diff = fh.read()
            except OSError as e:
                raise UsageError(f"{patch}: cannot read the diff: {e.strerror}")
        with runs.open_target(target_spec, ssh_config, known_hosts, accept_new_host_key, py) as target:
            result = pf.run(target, py, feat, flags, env_map, patched=classes, patch_diff=diff, dynamic=dynamic)
        if result["patched"]:
            from dynspec_cli.run import probe as probe_setup

            # for servers started by hand (the probe folder must exist on that host: dynspec launch copies it)
            result["probe_command"] = probe_setup.one_liner(
                probe_setup.probe_targets(feat, result, classes), command=[py, "-m", "sglang.launch_server", *flags])
    except known_errors() as e:
        return report(str(e))
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(result)
    else:
        from dynspec_cli.report.console import render_preflight

        render_preflight(result)
    return result["exit_code"]

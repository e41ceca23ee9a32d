"""`dynspec preflight`: before launch, which worker class will run and whether the patched code is
on its path. Like verify, it runs without typer when given in its usual form (cli/main.py)."""
from __future__ import annotations

import sys
from typing import Optional, Sequence


def run_preflight(profile: Optional[str] = None, extra: Sequence[str] = (), *, host: Optional[str] = None,
                  python: Optional[str] = None, env: Optional[Sequence[str]] = None, feature: Optional[str] = None,
                  patch: Optional[str] = None, patched_class: Optional[Sequence[str]] = None, dynamic: bool = False,
                  json_out: bool = False, ssh_config: Optional[str] = None, known_hosts: Optional[str] = None,
                  accept_new_host_key: bool = False, engine: Optional[str] = None,
                  sbatch: Optional[str] = None) -> int:
    """The whole command: inspect, judge, print the report (or JSON), return the exit code.
    `extra` are the engine's server flags (what follows `--`)."""
    if sbatch is not None:  # the user's own sbatch script
        return _check_script("sbatch", sbatch, json_out)
    from dynspec_cli.cli import checks, runs
    from dynspec_cli.cli.errors import UsageError, known_errors, report
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import patchfile
    from dynspec_cli.run.profiles import for_feature
    from dynspec_cli import engines

    extra = list(extra)
    patched = list(patched_class) if patched_class else None
    try:
        env = [checks.env_item(item) for item in env or []]
        if profile is not None and profile.startswith("--"):  # typer's reading of `preflight -- --flag ...`
            extra.insert(0, profile)
            profile = None
        prof = None
        if profile is not None:
            from dynspec_cli import place

            prof = place.server_profile(profile, host=host, env=list(env) if env else None)  # as its placement reads it
            feat = load_feature(feature or prof.feature)
            prof = for_feature(prof, feat)  # the engine decides the command line
            flags = prof.argv()[3:] + extra
            target_spec, py, env_map = prof.host, python or prof.python, dict(prof.env)
            module = prof.argv()[2]
            classes = patched or prof.patched_class or None
        else:
            target_spec, py, feat, classes = host or "local", python or "python3", load_feature(feature), patched
            module = None  # the engine's server module
            env_map = dict(item.split("=", 1) for item in env)
            flags = extra
        checks.python_path(py)
        engines.of(feat)  # what in the feature only its engine checks (a [plugin] section)
        name = engine if engine not in (None, engines.AUTO) else (prof.engine if prof else None) or engines.name_of(feat)
        if name not in engines.names():  # flags are the engine's server flags (`vllm serve` flags for vllm)
            raise UsageError(f"--engine {engine!r}: choose one of {', '.join(engines.names())}")
        eng = engines.get(name)
        module = module or eng.serving.module
        if profile is not None:
            checks.release("sglang_version", prof.sglang_version, f"{prof.source}: sglang_version")
        if patch is None and prof is not None and prof.patch:  # the profile's `patch` (resolved against its folder)
            patch = prof.patch
        if patch is None:  # the feature file's `patch = "F.diff"`
            from dynspec_cli.knowledge.features import patch_file

            patch = patch_file(feat)
        diff = patchfile.read_diff(patch) if patch is not None else None
        if dynamic and not json_out and sys.stderr.isatty():
            sys.stderr.write(f"dynspec: --dynamic: importing {eng.package} with {py} on {target_spec} "
                             f"({eng.title}'s own argument resolution; seconds) ...\n")
        with runs.open_target(target_spec, ssh_config, known_hosts, accept_new_host_key, py, profile=prof) as target:
            result = eng.preflight(target, py, feat, flags, env_map, classes, patch_diff=diff, dynamic=dynamic)
        if result["patched"] and eng.probe is not None:
            from dynspec_cli.cli import sshsettings

            # the ssh_config the host was reached with (option, environment or profile), so the
            # printed copy command reaches the same host
            cfg = sshsettings.resolve(ssh_config, known_hosts, prof)[0].value
            result.update(_start_command(eng.probe, feat, result, classes, [py, "-m", module, *flags], env_map, target_spec,
                                         cfg))
    except known_errors() as e:
        return report(str(e))
    _render(result, eng, json_out)
    return result["exit_code"]


def _render(result: dict, eng, json_out: bool) -> None:
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(result)
    elif (text := eng.preflight_text(result)) is not None:
        print(text)
    else:
        from dynspec_cli.report.console import render_preflight

        render_preflight(result)


def _check_script(kind: str, path: str, json_out: bool) -> int:
    """`--sbatch FILE` and its like: the user's own launch script, checked (never run) by the
    placement that runs such scripts."""
    from dynspec_cli import place
    from dynspec_cli.cli.errors import report
    from dynspec_cli.knowledge.tables import ConfigError

    try:
        return place.check_script(kind, path, json_out)
    except ConfigError as e:
        return report(str(e))


def _start_command(probe_setup, feat, result, classes, argv, env, target_spec, ssh_config) -> dict:
    """For servers started by hand: the exact judged server, with the probe (the engine's
    `probe`, engines/protocol.py ProbeSetup), on the host named."""
    import re

    from dynspec_cli.run.manual import start_command

    remote, port = None if target_spec in ("", "local") else target_spec, None
    if remote and (m := re.fullmatch(r"(.+):(\d+)", remote)):  # user@host:port
        remote, port = m.group(1), m.group(2)
    cmd = start_command(argv, env, probe_setup.probe_config(probe_setup.probe_targets(feat, result, classes)),
                        local_probe_dir=str(probe_setup.PROBE_DIR), remote=remote, port=port, ssh_config=ssh_config,
                        probe_files=probe_setup.probe_files() if remote else None)
    return {"probe_command": cmd.line, "probe_command_needs": cmd.needs, "probe_dir": cmd.probe_dir,
            "probe_copy": cmd.copy}

"""Options and helpers every command module shares (one definition, so `app`, `group` and
`prove` agree, and no command module imports another)."""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

SshConfig = Annotated[Optional[str], typer.Option(
    "--ssh-config", help="ssh_config file (default: $DYNSPEC_SSH_CONFIG, else the profile's ssh_config, else ~/.ssh/config).")]
KnownHosts = Annotated[Optional[str], typer.Option(
    "--known-hosts", help="known_hosts file (default: $DYNSPEC_KNOWN_HOSTS, else the profile's known_hosts, else the "
                          "ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts).")]
AcceptNewHostKey = Annotated[bool, typer.Option(
    "--accept-new-host-key", help="Accept and remember an unknown host key (like OpenSSH accept-new); a changed key is still refused.")]


def load_feature(ref):
    from dynspec_cli.knowledge.features import load_feature as _load

    return _load(ref)


def out(json_out: bool):
    """The console that reports go to (stderr when stdout carries JSON)."""
    from dynspec_cli.report.console import console

    return console(stderr=json_out)


class errors:
    """Known failures become one line on stderr and exit 2."""

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        if et is None:
            return False
        from dynspec_cli.cli.errors import known_errors, report

        if issubclass(et, known_errors()):
            code = report(str(e))
            if fate := getattr(e, "dynspec_run_fate", None):  # place/sequence.py: the run it was watching
                sys.stderr.write(f"dynspec: {fate}\n")
            raise typer.Exit(code)
        return False

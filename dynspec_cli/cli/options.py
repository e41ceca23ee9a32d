"""Options and helpers every command module shares (one definition, so `app`, `group` and
`prove` agree, and no command module imports another)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

SshConfig = Annotated[Optional[str], typer.Option("--ssh-config", help="ssh_config file (default ~/.ssh/config).")]
KnownHosts = Annotated[Optional[str], typer.Option("--known-hosts", help="known_hosts file (default ~/.ssh/known_hosts).")]
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
            raise typer.Exit(report(str(e)))
        return False

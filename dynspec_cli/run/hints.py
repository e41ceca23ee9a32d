"""The dynspec commands printed for the user to run next. Each one works pasted as is, in any
directory and any shell: it names the host and every file this command reached it with
(an ssh_config from the profile or the environment included), all shell-quoted."""
from __future__ import annotations

import shlex

OPTIONS = {"ssh_config": "--ssh-config", "known_hosts": "--known-hosts"}


def reach(name: str, files: dict[str, str]) -> list[str]:
    """`--host NAME --ssh-config F ...`."""
    return ["--host", name] + [w for key, opt in OPTIONS.items() if key in files for w in (opt, files[key])]


def command(*words: str, host) -> str:
    """`dynspec WORDS --host H ...` for a run on `host` (a Host), quoted for a POSIX shell."""
    return shlex.join(["dynspec", *words, *reach(host.name, host.reach_files())])

"""POSIX sh scripts built from argv/env/cwd, and the envelope that carries one through an SSH login shell.

Every host runs the same scripts with `/bin/sh -c SCRIPT`: locally directly, over SSH inside
`envelope()`. Values only ever enter a script as single `shlex.quote`d words, never through
string formatting into code, so `$(...)`, backticks, `;`, quotes, newlines and unicode stay data.
Environment values never enter a script at all: a script is a command line, readable by every
user in /proc; they come on stdin (`env_input`, `READ_ENV`) and are exported from there.

Why the envelope: SSH always hands the command string to the remote user's login shell, which may
be bash, zsh, fish or tcsh. shlex.quote is POSIX quoting (fish treats `\\'` inside single quotes
differently). The envelope carries the script as octal escapes (`\\NNN`, digits only) inside one
single-quoted word, which every one of those shells passes through unchanged, and `/bin/sh`
decodes it with printf.
"""
from __future__ import annotations

import re
import shlex
import signal
from typing import Mapping, Sequence

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Linux MAX_ARG_STRLEN is 128 KiB for one argv string; the envelope is 4 bytes per script byte.
MAX_ENVELOPE = 120_000


def quote(value: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError("NUL byte in an argument, env value or path")
    return shlex.quote(value)


def words(*values: str) -> str:
    return " ".join(quote(v) for v in values)


def env_words(env: Mapping[str, str] | None) -> list[str]:
    """`K=V` pairs (exported from stdin, see READ_ENV). Names are validated: `export` would take `-x`
    as an option and `A=B=C` as a different split, and a name is never something a caller should make up."""
    out = []
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ValueError(f"invalid environment variable name {key!r}")
        if not isinstance(value, str):
            raise TypeError(f"environment value for {key} must be str, got {type(value).__name__}")
        out.append(f"{key}={value}")
    return out


def check_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a list of strings, not a string")
    argv = list(argv)
    if not argv:
        raise ValueError("empty argv")
    if argv[0].startswith("-"):
        # a shell's `exec` may read it as an option (bash does; dash has none, not even `--`)
        raise ValueError(f"argv[0] must not start with '-': {argv[0]!r}")
    for a in argv:
        quote(a)
    return argv


def command(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """Script that runs argv with env added to the host's environment, in cwd.
    `exec` all the way down: the process that runs is the one the host started (same pid/pgid).
    With env, the script takes it from the first line of its stdin: feed `env_input(env)` before
    anything else the command reads."""
    argv = check_argv(argv)
    run = _env_read(env) + "exec " + words(*argv)  # (not `env --`: it takes a path holding '=' for a variable)
    if cwd is None:
        return run
    return f"cd -- {quote(cwd)} || exit 126\n{run}"


# The environment travels on stdin, never in a script or an argv: a script is a command line
# (`/bin/sh -c SCRIPT` here, the login shell's over SSH), and any local user can read command
# lines in /proc; a process's environment only its owner can. One line of octal escapes (as in the
# envelope: digits only, so any bytes and newlines survive `read`) that decodes to `export K='V'`
# lines; `read` takes exactly that line (sh reads a pipe a byte at a time), the rest of stdin is
# the command's. printf and eval are builtins: the values reach no command line on the way.
READ_ENV = 'IFS= read -r _dynspec_env || exit 125; eval "$(printf "$_dynspec_env")"; unset _dynspec_env\n'


def _env_read(env: Mapping[str, str] | None) -> str:
    return READ_ENV if env_words(env) else ""


def env_input(env: Mapping[str, str] | None) -> bytes:
    """The stdin line a script made with `env` reads first (empty without env)."""
    lines = "".join(f"export {quote(w.partition('=')[0])}={quote(w.partition('=')[2])}\n" for w in env_words(env))
    return (encode(lines) + "\n").encode("ascii") if lines else b""


def encode(text: str) -> str:
    """text as printf octal escapes (`\\NNN` per byte): digits and backslashes only."""
    return "".join(f"\\{b:03o}" for b in text.encode("utf-8", "surrogateescape"))


def call(body: str, *args: str) -> str:
    """Script that runs the constant `body` with `args` as its positional parameters $1..$n."""
    if not args:
        return body
    return f"set -- {words(*args)}\n{body}"


def envelope(script: str, *, report_pid: bool = False) -> str:
    """The remote command string that makes the login shell run `script` with /bin/sh.
    report_pid: first write "<pid>\\n" to stderr; the login shell execs /bin/sh, which execs the
    script's command, so that pid is sshd's session child, the leader of the process group."""
    data = script.encode("utf-8", "surrogateescape")
    encoded = encode(script)
    pid = "echo $$ >&2; " if report_pid else ""
    line = f"exec /bin/sh -c '{pid}eval \"$(printf \"{encoded}\")\"'"
    if len(line) > MAX_ENVELOPE:
        raise ValueError(
            f"command too long for an SSH exec ({len(data)} bytes of script); pass large data as input"
        )
    return line


def signal_name(sig: int) -> str:
    """`TERM` for 15: kill -s takes names portably, numbers only as an extension."""
    return signal.Signals(sig).name.removeprefix("SIG")


# --- helper scripts (constant bodies; values arrive as $1..$n) -----------------------------------

# spawn_detached. Outer: cd, then start setsid in the background and return at once (the outer
# shell's exit does not wait for it). setsid execs env execs /bin/sh execs argv: one pid all the
# way, and setsid made it a session and group leader, so pid == pgid and no terminal or SSH session
# hangup reaches it. The inner sh reports its pid on fd 3 (the caller's stdout) only after stdin
# and output are redirected, so a bad log path or a missing command is reported to the caller.
# _SPAWN_BODY is what both spawns run once their arguments are taken.
_SPAWN_BODY = r"""command -v -- "$1" >/dev/null 2>&1 || { printf 'command not found: %s\n' "$1" >&2; exit 127; }
exec 3>&1
exec >>"$log" 2>&1 </dev/null
trap '' HUP
echo "$$" >&3
exec "$@" 3>&-
"""
SPAWN_INNER = "log=$1; shift\n" + _SPAWN_BODY


def spawn(argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None, log_path: str) -> str:
    return _setsid(SPAWN_INNER, [log_path], argv, env, cwd)


# spawn_tracked: as SPAWN_INNER, but before anything can fail the inner sh (already in its own
# session, so no death of the caller can reach it) writes its pid to $2 atomically: whatever moment
# the caller dies, the process it started can be found. The pid is the server's (exec keeps it).
SPAWN_TRACKED_INNER = (r"""log=$1; pidf=$2; shift 2
printf '%s\n' "$$" >"$pidf.tmp.$$" && mv -f -- "$pidf.tmp.$$" "$pidf"
""" + _SPAWN_BODY)


def spawn_tracked(argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None, log_path: str,
                  pid_file: str) -> str:
    return _setsid(SPAWN_TRACKED_INNER, [log_path, pid_file], argv, env, cwd)


def _setsid(inner: str, args: list[str], argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> str:
    """The spawn script: env (from stdin, see READ_ENV) is exported before setsid, so the server
    inherits it and no command line on the way carries a value."""
    argv = check_argv(argv)
    start = "setsid " + words("/bin/sh", "-c", inner, "sh", *args, *argv)
    cd = "" if cwd is None else f"cd -- {quote(cwd)} || exit 126\n"
    return f"{_env_read(env)}{cd}{start} &\n"


# dynspec's own directory on the host: $DYNSPEC_HOME there, else ~/.dynspec.
DYNSPEC_HOME = r"""printf '%s' "${DYNSPEC_HOME:-$HOME/.dynspec}" """

# Alive = exists and is not a zombie. Zombies matter: a detached process is reparented to pid 1,
# and in containers pid 1 often never reaps, so `kill -0` alone says "alive" forever.
IS_ALIVE = r"""p=$1
if [ -d /proc/self ]; then
  IFS= read -r line 2>/dev/null </proc/"$p"/stat || exit 1
  s=${line##*") "}; s=${s%% *}
  case $s in Z|X|x) exit 1;; esac
  exit 0
fi
kill -0 "$p" 2>/dev/null
"""

# Any non-zombie process whose process group is $1. (Zombies stay in their group and accept
# signals, so `kill -0 -- -pgid` would say yes.)
_GROUP_ALIVE_FN = r"""group_alive() {
  if [ -d /proc/self ]; then
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '
      { sub(/.*\) /, ""); if ($3 == g && $1 != "Z" && $1 != "X" && $1 != "x") found = 1 }
      END { exit !found }'
    return
  fi
  kill -0 -- "-$1" 2>/dev/null
}
"""

GROUP_ALIVE = _GROUP_ALIVE_FN + 'group_alive "$1"\n'

# $1 = signal name, $2 = pgid. Exit 1 when no live process is left in the group.
SIGNAL_GROUP = _GROUP_ALIVE_FN + r"""group_alive "$2" || exit 1
kill -s "$1" -- "-$2" 2>/dev/null
"""

# read_file: 3 = missing, 4 = unreadable, 5 = a directory.
READ_FILE = r"""f=$1; off=$2; len=$3
[ -e "$f" ] || exit 3
[ -d "$f" ] && exit 5
[ -r "$f" ] || exit 4
if [ "$len" -lt 0 ]; then exec tail -c +"$((off + 1))" -- "$f"; fi
tail -c +"$((off + 1))" -- "$f" | head -c "$len"
"""

# write_file: atomic (temp file in the same directory, then rename), mode applied before rename.
# The data's length is checked before the rename: stdin ending early (the writer killed mid-write
# closes the pipe, and `cat` takes that EOF for the end) must not commit a truncated file.
WRITE_FILE = r"""f=$1; mode=$2; want=$3; t="$f.dynspec-tmp.$$"
umask 077
if cat >"$t" && n=$(wc -c <"$t") && [ $n -eq "$want" ] && chmod "$mode" -- "$t" && mv -f -- "$t" "$f"; then exit 0; fi
rm -f -- "$t"; exit 1
"""

EXISTS = r"""[ -e "$1" ] || [ -L "$1" ]"""

REMOVE = r"""[ -e "$1" ] || [ -L "$1" ] || exit 0
[ -d "$1" ] && ! [ -L "$1" ] && exit 5
rm -f -- "$1"
"""

# size: empty output = missing.
SIZE = r"""[ -f "$1" ] || exit 3
wc -c <"$1"
"""

HOME = r"""printf '%s' "$HOME" """

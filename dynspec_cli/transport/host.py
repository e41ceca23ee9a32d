"""`Host`: the few things dynspec does on a machine, written once over one primitive.

Like invoke's Runner: the base class owns the whole life of a command (start, feed stdin, collect
or stream output, timeout, kill, exit code) and every operation (files, processes, following a
log) is a POSIX sh script from `shell`. A subclass supplies only `_start(script)`, which runs a
script with /bin/sh and hands back a `Process` (pipes, wait, kill), and, if its connection can
die, `_reconnect()`. Callers never ask "am I local or remote?".

Paths that are not absolute are relative to the host's working directory: the current directory
for LocalHost, the login directory for SSHHost.
"""
from __future__ import annotations

import abc
import signal
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from dynspec_cli.transport import shell
from dynspec_cli.transport.errors import CommandFailed, CommandTimeout, SpawnFailed

if TYPE_CHECKING:
    from dynspec_cli.transport.follow import Follow


@dataclass(frozen=True)
class Result:
    exit_code: int  # negative: killed by a signal (-N when the number is known, -1 otherwise)
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


@dataclass(frozen=True)
class Spawned:
    pid: int
    pgid: int
    log_path: str


class Process(abc.ABC):
    """A running `/bin/sh -c script` on some host: the primitive subclasses supply."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Write to stdin (blocking). Raises BrokenPipeError/OSError if the process stopped reading."""

    @abc.abstractmethod
    def close_stdin(self) -> None: ...

    @abc.abstractmethod
    def read(self, timeout: float | None) -> tuple[bytes, bytes, bool]:
        """Wait up to `timeout` for output. Returns (stdout chunk, stderr chunk, eof), where eof
        means both streams are finished. Returns (b"", b"", False) on timeout."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Exit code, or None if still running after timeout. Raises ConnectionLost."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the process group unless it exited (best effort, idempotent); release resources."""

    @abc.abstractmethod
    def interrupt(self) -> None:
        """From any thread: make a read() blocked in another thread return eof soon."""


class Host(abc.ABC):
    name: str
    python: str  # interpreter used for the host's own helpers (the follower)
    # Capabilities, asked instead of "which kind of host is this?":
    # the host's files are this machine's files (a path here names the same file there)
    shares_local_files: bool = False

    def address(self) -> str | None:
        """The network address dynspec reaches this host at (ssh_config HostName); None for
        this machine."""
        return None

    # --- supplied by subclasses ------------------------------------------------------------
    @abc.abstractmethod
    def _start(self, script: str, *, stdin: bool) -> Process:
        """Run `script` with /bin/sh in its own process group. stdin=False: stdin is at EOF."""

    def _reconnect(self, *, force: bool = False) -> None:
        """Make the host usable again after its connection died (force: even if it looks alive)."""

    def close(self) -> None:
        """Release connections. The host object can be used again (it reconnects)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # --- commands ---------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        input: bytes | None = None,
        timeout: float | None = None,
        check: bool = False,
    ) -> Result:
        """Run argv to completion. env adds to (overrides in) the host's environment.
        timeout: the process group is killed and CommandTimeout raised."""
        result = self._run_script(shell.command(argv, env=env, cwd=cwd), input=input, timeout=timeout)
        if check and not result.ok:
            raise _failed(self.name, argv[0], result)
        return result

    def run_python(
        self,
        python: str,
        script: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        check: bool = False,
    ) -> Result:
        """Run a script with the host's `python` (`python - args`); the text goes on stdin, so
        nothing is written on the host and the script cannot itself read stdin."""
        return self.run([python, "-", *args], env=env, cwd=cwd, input=script.encode("utf-8"),
                        timeout=timeout, check=check)

    def stream_python(
        self,
        python: str,
        script: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Iterator[bytes]:
        """Yield the script's stdout as it arrives (python -u). Stopping the iteration kills the
        process; a non-zero exit raises CommandFailed with its stderr."""
        proc = self._start(shell.command([python, "-u", "-", *args], env=env, cwd=cwd), stdin=True)
        try:
            _feed(proc, script.encode("utf-8"))
            err = bytearray()
            while True:
                out, e, eof = proc.read(None)
                err += e
                del err[:-65536]
                if out:
                    yield out
                if eof:
                    break
            code = proc.wait()
            if code != 0:
                raise _failed(self.name, python, Result(code, b"", bytes(err)))
        finally:
            proc.kill()

    def _run_script(self, script: str, *, input: bytes | None = None, timeout: float | None = None) -> Result:
        deadline = None if timeout is None else time.monotonic() + timeout
        proc = self._start(script, stdin=input is not None)
        out, err = bytearray(), bytearray()
        try:
            if input is not None:
                # a thread, so a process that writes a lot before reading all its input cannot
                # deadlock against us
                threading.Thread(target=_feed, args=(proc, input), daemon=True).start()
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise CommandTimeout(self.name, f"command timed out after {timeout:g}s; killed",
                                         stdout=bytes(out), stderr=bytes(err))
                o, e, eof = proc.read(remaining)
                out += o
                err += e
                if eof:
                    break
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                code = proc.wait(remaining)
                if code is not None:
                    return Result(code, bytes(out), bytes(err))
                raise CommandTimeout(self.name, f"command timed out after {timeout:g}s; killed",
                                     stdout=bytes(out), stderr=bytes(err))
        finally:
            proc.kill()

    # --- processes --------------------------------------------------------------------------
    def spawn_detached(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        log_path: str,
    ) -> Spawned:
        """Start argv in its own session (setsid; SIGHUP ignored as with nohup), stdin from
        /dev/null, stdout+stderr appended to log_path. It outlives this call, the SSH session and
        the connection. Returns the real pid of argv (== its pgid)."""
        res = self._run_script(shell.spawn(argv, env=env, cwd=cwd, log_path=log_path), timeout=60)
        line = res.stdout.decode(errors="replace").strip()
        if not line.isdigit():
            why = res.stderr.decode(errors="replace").strip().splitlines()
            raise SpawnFailed(self.name, f"could not start {argv[0]!r}: "
                                         f"{why[-1] if why else f'exit code {res.exit_code}'}")
        pid = int(line)
        return Spawned(pid=pid, pgid=pid, log_path=log_path)

    def is_alive(self, pid: int) -> bool:
        """The process exists and is not a zombie."""
        return self._run_script(shell.call(shell.IS_ALIVE, str(int(pid))), timeout=30).ok

    def group_alive(self, pgid: int) -> bool:
        """Some non-zombie process is still in process group pgid."""
        return self._run_script(shell.call(shell.GROUP_ALIVE, str(int(pgid))), timeout=30).ok

    def signal_group(self, pgid: int, sig: int = signal.SIGTERM) -> bool:
        """Send sig to every process of group pgid. False if the group no longer exists."""
        if int(pgid) <= 1:
            raise ValueError(f"refusing to signal process group {pgid}")
        script = shell.call(shell.SIGNAL_GROUP, shell.signal_name(sig), str(int(pgid)))
        return self._run_script(script, timeout=30).ok

    def stop_group(self, pgid: int, *, grace: float = 10.0) -> bool:
        """SIGTERM the group, SIGKILL what is left after `grace` seconds. True once none remain."""
        self.signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self.group_alive(pgid):
                return True
            time.sleep(0.05)
        self.signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if not self.group_alive(pgid):
                return True
            time.sleep(0.05)
        return False

    # --- files ------------------------------------------------------------------------------
    def read_file(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        res = self._run_script(shell.call(shell.READ_FILE, path, str(int(offset)), str(int(length))))
        if res.exit_code == 3:
            raise FileNotFoundError(2, f"{self.name}: no such file", path)
        if res.exit_code == 4:
            raise PermissionError(13, f"{self.name}: not readable", path)
        if res.exit_code == 5:
            raise IsADirectoryError(21, f"{self.name}: is a directory", path)
        if not res.ok:
            raise OSError(f"{self.name}: reading {path}: {res.stderr.decode(errors='replace').strip()}")
        return res.stdout

    def write_file(self, path: str, data: bytes, mode: int = 0o600) -> None:
        """Atomically replace path with data (parent directory must exist)."""
        res = self._run_script(shell.call(shell.WRITE_FILE, path, format(mode, "o")), input=bytes(data))
        if not res.ok:
            raise OSError(f"{self.name}: writing {path}: {res.stderr.decode(errors='replace').strip()}")

    def exists(self, path: str) -> bool:
        return self._run_script(shell.call(shell.EXISTS, path)).ok

    def size(self, path: str) -> int | None:
        """Size in bytes of a regular file, None if there is none (e.g. to follow from the end)."""
        res = self._run_script(shell.call(shell.SIZE, path))
        return int(res.stdout) if res.ok else None

    def remove(self, path: str) -> None:
        """Remove a file (or symlink); a missing path is fine, a directory is an error."""
        res = self._run_script(shell.call(shell.REMOVE, path))
        if res.exit_code == 5:
            raise IsADirectoryError(21, f"{self.name}: is a directory", path)
        if not res.ok:
            raise OSError(f"{self.name}: removing {path}: {res.stderr.decode(errors='replace').strip()}")

    def home(self) -> str:
        cached = getattr(self, "_home", None)
        if cached is None:
            res = self._run_script(shell.HOME, timeout=30)
            cached = self._home = res.stdout.decode("utf-8", "surrogateescape")
        return cached

    # --- following --------------------------------------------------------------------------
    def follow(
        self,
        path: str,
        offset: int = 0,
        *,
        inode: int | None = None,
        python: str | None = None,
        heartbeat: float = 1.0,
        reconnect_for: float = 60.0,
        watch: str = "auto",
    ) -> "Follow":
        """Events for path from byte `offset` on, until closed (see `follow.Follow`, `Event`).
        inode: the inode `offset` refers to, when resuming an earlier follow (another file at the
        path by now gives a `gap` event). heartbeat: seconds between the follower's liveness
        records; silence for 3 of them + 1 s counts as a dead connection. reconnect_for: how long
        to keep trying to get the follower back before raising FollowError. watch: "poll" to
        poll (10 ms) even where inotify exists."""
        from dynspec_cli.transport.follow import Follow

        return Follow(self, path, offset, inode=inode, python=python or self.python, heartbeat=heartbeat,
                      reconnect_for=reconnect_for, watch=watch)


def _feed(proc: Process, data: bytes) -> None:
    try:
        if data:
            proc.write(data)
        proc.close_stdin()
    except (OSError, EOFError):
        pass  # the process stopped reading; its exit code tells the story


def _failed(host: str, what: str, result: Result) -> CommandFailed:
    err = result.stderr.decode("utf-8", "replace").strip().splitlines()
    last = f": {err[-1]}" if err else ""
    return CommandFailed(host, f"{what} exited with {result.exit_code}{last}", result)

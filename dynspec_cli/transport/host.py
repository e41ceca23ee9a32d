"""`Host`: the few things dynspec does on a machine, written once over one primitive.

Like invoke's Runner: the base class owns the whole life of a command (start, feed stdin, collect
or stream output, timeout, kill, exit code) and every operation (files, processes, following a
log) is a POSIX sh script from `shell`. A subclass supplies only `start_script(script)`, which runs a
script with /bin/sh and hands back a `Process` (pipes, wait, kill), and, if its connection can
die, `_reconnect()`. Callers never ask "am I local or remote?".

Connection drops: an operation that is safe to repeat (liveness, signals, file reads and atomic
writes) goes on through a reconnect when the connection dies under it (`_retrying`: bounded, with
backoff, each drop told to `host.drops` listeners). `run`/`run_python` do so only when the caller
says the command is idempotent; `spawn_detached` never runs its command twice (see there).

Paths that are not absolute are relative to the host's working directory: the current directory
for LocalHost, the login directory for SSHHost.
"""
from __future__ import annotations

import abc
import signal
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence, TypeVar

from dynspec_cli.transport import drops as _drops
from dynspec_cli.transport import shell
from dynspec_cli.transport.errors import (CommandFailed, CommandTimeout, ConnectError, ConnectionClosed,
                                         ConnectionLost, SpawnFailed)

if TYPE_CHECKING:
    from dynspec_cli.transport.follow import Follow

T = TypeVar("T")


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

    generation: int | None = None  # which connection of its host it runs on (None: no connection)

    def lost(self) -> bool:
        """Whether it ended because its host's connection died (not because it exited)."""
        return False


class Host(abc.ABC):
    name: str
    python: str  # interpreter used for the host's own helpers (the follower)
    reconnect_for: float = _drops.RETRY_FOR  # seconds one call keeps trying through drops
    reconnect_attempts: int = _drops.RETRY_ATTEMPTS
    # Capabilities, asked instead of "which kind of host is this?":
    # the host's files are this machine's files (a path here names the same file there)
    shares_local_files: bool = False
    # a process started on this host gets dynspec's own environment (this shell's), so an
    # `export` here reaches it; elsewhere it gets the host's login environment
    inherits_this_shell: bool = False

    @property
    def environment(self) -> str:
        """Where a process started here gets its environment from, in words."""
        return "this shell's environment" if self.inherits_this_shell else f"the login environment on {self.name}"

    def reach_files(self) -> dict[str, str]:
        """The files, besides its name, that reaching this host again takes (`ssh_config`,
        `known_hosts`: absolute paths, only those that are not OpenSSH's defaults); {} here."""
        return {}

    def address(self) -> str | None:
        """The network address dynspec reaches this host at (ssh_config HostName); None for
        this machine."""
        return None

    # --- supplied by subclasses ------------------------------------------------------------
    @abc.abstractmethod
    def start_script(self, script: str, *, stdin: bool) -> Process:
        """Run `script` with /bin/sh in its own process group. stdin=False: stdin is at EOF."""

    def _reconnect(self, *, force: bool = False, generation: int | None = None) -> None:
        """Make the host usable again after its connection died (force: even if it looks alive;
        with `generation`, only if the current connection is still that one, so two threads that
        saw the same drop do not tear down each other's fresh connection)."""

    @property
    def drops(self) -> _drops.DropLog:
        """Connection drops so far (`.count`, `.reconnect_times`) and `.add_listener(fn)`: fn(Drop)
        is called on every drop, reconnect and give-up (e.g. a live display)."""
        log = self.__dict__.get("_drop_log")
        if log is None:
            log = self.__dict__.setdefault("_drop_log", _drops.DropLog(self.name))
        return log

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
        idempotent: bool = False,
    ) -> Result:
        """Run argv to completion. env adds to (overrides in) the host's environment.
        timeout: the process group is killed and CommandTimeout raised.
        idempotent: running it twice is harmless (a read, `mkdir -p`), so a connection drop under
        it is retried through a reconnect; otherwise a drop raises ConnectionLost."""
        result = self._script(argv[0] if argv else "run", shell.command(argv, env=env, cwd=cwd),
                              input=_with_env(env, input), timeout=timeout, idempotent=idempotent)
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
        idempotent: bool = False,
    ) -> Result:
        """Run a script with the host's `python` (`python - args`); the text goes on stdin, so
        nothing is written on the host and the script cannot itself read stdin. idempotent: as
        for `run` (a health or port check is; a load generator is not)."""
        return self.run([python, "-", *args], env=env, cwd=cwd, input=script.encode("utf-8"),
                        timeout=timeout, check=check, idempotent=idempotent)

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
        proc = self.start_script(shell.command([python, "-u", "-", *args], env=env, cwd=cwd), stdin=True)
        try:
            _feed(proc, shell.env_input(env) + script.encode("utf-8"))
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

    def _script(self, what: str, script: str, *, input: bytes | None = None, timeout: float | None = None,
                idempotent: bool = True) -> Result:
        return self._retrying(what, lambda: self._run_script(script, input=input, timeout=timeout),
                              idempotent=idempotent)

    def _retrying(self, what: str, call: Callable[[], T], *, idempotent: bool) -> T:
        """call() until it returns. A ConnectionLost is tried again (each try reconnects) when the
        call is idempotent or cannot have reached the host; a failed reconnect while a drop is
        being repaired is tried again unless it can never work (host key, ssh_config). Bounded by
        `reconnect_for` seconds and `reconnect_attempts` tries, 0.05 s doubling to 2 s apart."""
        log = self.drops
        backoff = _drops.Backoff()
        give_up_at: float | None = None
        tries = 0
        while True:
            try:
                return call()
            except ConnectionLost as e:
                log.lost(e.generation, what, e.detail)
                self._reconnect_later(e.generation)
                if e.may_have_run and not idempotent:
                    raise
                err: Exception = e
            except ConnectError as e:
                if not (log.pending or isinstance(e, ConnectionClosed)) or not _drops.transient(e, reconnecting=True):
                    raise
                if not log.pending:  # the first connection cut while being made: a drop like any other
                    log.lost(None, what, e.detail)
                err = e
            tries += 1
            now = time.monotonic()
            give_up_at = give_up_at or now + self.reconnect_for
            if now >= give_up_at or tries >= self.reconnect_attempts:
                detail = getattr(err, "detail", str(err))
                log.gave_up(what, detail)
                raise type(err)(self.name, f"{what}: gave up after {tries} attempts to get the connection back "
                                           f"({self.reconnect_for:g}s budget): {detail}") from err
            time.sleep(backoff.next())

    def _reconnect_later(self, generation: int | None) -> None:
        """Forget the dead connection `generation` (the next command opens a new one)."""

    def _run_script(self, script: str, *, input: bytes | None = None, timeout: float | None = None) -> Result:
        deadline = None if timeout is None else time.monotonic() + timeout
        proc = self.start_script(script, stdin=input is not None)
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
        the connection. Returns the real pid of argv (== its pgid).
        A drop before the command reached the host is retried; a drop after it may have (the exec
        request was sent) raises ConnectionLost: starting a second server would be worse than
        reporting that the first one's pid is unknown."""
        res = self._script("spawn", shell.spawn(argv, env=env, cwd=cwd, log_path=log_path),
                           input=_with_env(env, None), timeout=60, idempotent=False)
        return self._spawned(argv, res, log_path)

    def spawn_tracked(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        log_path: str,
        pid_file: str,
    ) -> Spawned:
        """spawn_detached that first writes the new process's pid to pid_file on the host (from
        inside its own session, before the caller learns the pid): a caller killed at any moment
        leaves a findable process, never an anonymous one."""
        script = shell.spawn_tracked(argv, env=env, cwd=cwd, log_path=log_path, pid_file=pid_file)
        res = self._run_script(script, input=_with_env(env, None), timeout=60)
        return self._spawned(argv, res, log_path)

    def _spawned(self, argv: Sequence[str], res: Result, log_path: str) -> Spawned:
        """The pid a spawn script printed (== its pgid), or SpawnFailed with its last stderr line."""
        line = res.stdout.decode(errors="replace").strip()
        if not line.isdigit():
            why = res.stderr.decode(errors="replace").strip().splitlines()
            raise SpawnFailed(self.name, f"could not start {argv[0]!r}: "
                                         f"{why[-1] if why else f'exit code {res.exit_code}'}")
        pid = int(line)
        return Spawned(pid=pid, pgid=pid, log_path=log_path)

    def is_alive(self, pid: int) -> bool:
        """The process exists and is not a zombie."""
        return self._script("is_alive", shell.call(shell.IS_ALIVE, str(int(pid))), timeout=30).ok

    def group_alive(self, pgid: int) -> bool:
        """Some non-zombie process is still in process group pgid."""
        return self._script("group_alive", shell.call(shell.GROUP_ALIVE, str(int(pgid))), timeout=30).ok

    def signal_group(self, pgid: int, sig: int = signal.SIGTERM) -> bool:
        """Send sig to every process of group pgid. False if the group no longer exists.
        Retried through a drop: the same signal twice to a group that is going down asks for the
        same thing, and the group is checked to still exist right before each try."""
        if int(pgid) <= 1:
            raise ValueError(f"refusing to signal process group {pgid}")
        script = shell.call(shell.SIGNAL_GROUP, shell.signal_name(sig), str(int(pgid)))
        return self._script("signal_group", script, timeout=30).ok

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
        res = self._script("read_file", shell.call(shell.READ_FILE, path, str(int(offset)), str(int(length))))
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
        """Atomically replace path with data (parent directory must exist). Atomic, so writing
        it again after a drop leaves the same file."""
        res = self._script("write_file", shell.call(shell.WRITE_FILE, path, format(mode, "o"), str(len(data))),
                           input=bytes(data))
        if not res.ok:
            raise OSError(f"{self.name}: writing {path}: {res.stderr.decode(errors='replace').strip()}")

    def exists(self, path: str) -> bool:
        return self._script("exists", shell.call(shell.EXISTS, path)).ok

    def size(self, path: str) -> int | None:
        """Size in bytes of a regular file, None if there is none (e.g. to follow from the end)."""
        res = self._script("size", shell.call(shell.SIZE, path))
        return int(res.stdout) if res.ok else None

    def remove(self, path: str) -> None:
        """Remove a file (or symlink); a missing path is fine, a directory is an error."""
        res = self._script("remove", shell.call(shell.REMOVE, path))
        if res.exit_code == 5:
            raise IsADirectoryError(21, f"{self.name}: is a directory", path)
        if not res.ok:
            raise OSError(f"{self.name}: removing {path}: {res.stderr.decode(errors='replace').strip()}")

    def home(self) -> str:
        cached = getattr(self, "_home", None)
        if cached is None:
            res = self._script("home", shell.HOME, timeout=30)
            cached = self._home = res.stdout.decode("utf-8", "surrogateescape")
        return cached

    def dynspec_home(self) -> str:
        """dynspec's directory on this host: its $DYNSPEC_HOME (a leading ~/ is its home), else ~/.dynspec."""
        cached = getattr(self, "_dynspec_home", None)
        if cached is None:
            res = self._script("dynspec home", shell.DYNSPEC_HOME, timeout=30)
            cached = res.stdout.decode("utf-8", "surrogateescape").rstrip("/") or self.home().rstrip("/") + "/.dynspec"
            if cached == "~" or cached.startswith("~/"):
                cached = self.home().rstrip("/") + cached[1:]
            self._dynspec_home = cached
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


def _with_env(env: Mapping[str, str] | None, input: bytes | None) -> bytes | None:
    """stdin of a script made with env: the env line first (see shell.READ_ENV), then input."""
    head = shell.env_input(env)
    return head + (input or b"") if head else input


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

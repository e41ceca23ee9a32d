"""SSHHost: scripts run by the remote /bin/sh over one paramiko connection (lazily opened).

Importing this module does not import paramiko; the first connection does (see sshconnect).
Each operation is one SSH exec channel. The command string is `shell.envelope(script)`, so the
remote login shell (bash, zsh, fish, ...) only ever sees digits and a fixed wrapper.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from dynspec_cli.transport import shell
from dynspec_cli.transport.errors import ConnectionLost
from dynspec_cli.transport.host import Host, Process


@dataclass
class Options:
    """What SSHHost was constructed with (resolved against ssh_config at connect time)."""

    destination: str
    ssh_config_path: str | None = "~/.ssh/config"
    known_hosts_path: str | None = None  # None: UserKnownHostsFile from config, else ~/.ssh/known_hosts
    accept_new_host_key: bool | None = None  # None: StrictHostKeyChecking accept-new from config, else no
    connect_timeout: float | None = None  # None: ConnectTimeout from config, else 10 s
    keepalive: float | None = None  # None: ServerAliveInterval from config, else 15 s
    allow_agent: bool = True
    look_for_keys: bool = True


class _Readable:
    """Set while a channel's stdout or stderr has data or is closed: what `select` on the
    channel's fileno would say, without the fileno.

    paramiko's fileno is an OS pipe that the transport thread writes to when data arrives, and
    `Channel.close()` closes it without the lock the transport thread writes under. A close from
    another thread (interrupting a read, killing a command) while data arrives made that write
    hit a closed descriptor: EBADF ended the transport, and every command on the connection saw a
    drop that nobody caused (or, had the number been reused meanwhile, "*" went into another
    file). Events are plain objects, so closing the channel has nothing to race with.
    `flag(i)` is what `BufferedPipe.set_event` takes (it only calls set and clear)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._set = [False, False]
        self._woken = False

    def flag(self, i: int) -> "_Flag":
        return _Flag(self, i)

    def _put(self, i: int, value: bool) -> None:
        with self._cond:
            self._set[i] = value
            if value:
                self._cond.notify_all()

    @property
    def woken(self) -> bool:
        return self._woken

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def wait(self, timeout: float | None) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._woken or any(self._set), timeout)


class _Flag:
    def __init__(self, readable: _Readable, i: int) -> None:
        self._readable, self._i = readable, i

    def set(self) -> None:
        self._readable._put(self._i, True)

    def clear(self) -> None:
        self._readable._put(self._i, False)


class SSHProcess(Process):
    """One exec channel. The envelope reports the session's pid as the first stderr line (taken
    off here): killing needs it, because sshd ignores "signal" requests for root logins."""

    def __init__(self, host: "SSHHost", transport, chan, *, stdin: bool, generation: int):
        self._host = host
        self._transport = transport
        self._chan = chan
        self.generation = generation
        self._pid: int | None = None
        self._head = b""
        self._readable = _Readable()
        chan.in_buffer.set_event(self._readable.flag(0))
        chan.in_stderr_buffer.set_event(self._readable.flag(1))
        if not stdin:
            chan.shutdown_write()

    def write(self, data: bytes) -> None:
        self._chan.sendall(data)

    def close_stdin(self) -> None:
        self._chan.shutdown_write()

    def read(self, timeout: float | None) -> tuple[bytes, bytes, bool]:
        chan = self._chan
        if not (chan.recv_ready() or chan.recv_stderr_ready() or chan.eof_received or chan.closed):
            self._readable.wait(timeout)  # data on stdout or stderr, EOF, close, or interrupt()
        out = chan.recv(65536) if chan.recv_ready() else b""
        err = chan.recv_stderr(65536) if chan.recv_stderr_ready() else b""
        ended = chan.eof_received or chan.closed or self._readable.woken
        eof = ended and not chan.recv_ready() and not chan.recv_stderr_ready()
        if self._pid is None:
            err = self._take_pid(err, eof)
        return out, err, eof

    def _take_pid(self, err: bytes, eof: bool) -> bytes:
        self._head += err
        line, nl, rest = self._head.partition(b"\n")
        if nl:
            self._pid = int(line) if line.isdigit() else 0
            self._head = b""
            return rest
        if eof or len(self._head) > 32:
            self._pid, rest, self._head = 0, self._head, b""
            return rest
        return b""

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._chan.status_event.wait(timeout):
            return None
        code = self._chan.exit_status
        if code == -1 and self.lost():
            raise ConnectionLost(self._host.name, "connection lost while a command was running",
                                 generation=self.generation)
        self._exited = True
        return code

    def lost(self) -> bool:
        return connection_lost(self._transport)

    def interrupt(self) -> None:
        self._chan.close()  # thread-safe (no fileno pipe to race with: see _Readable)
        self._readable.wake()  # a blocked read() returns and sees eof

    def kill(self) -> None:
        chan = self._chan
        if not getattr(self, "_exited", False) and chan.exit_status == -1:
            if not chan.closed:
                _send_signal(chan, "KILL")  # enough for non-root logins
            if self._pid and self._transport.is_active():
                self._host._kill_group(self._transport, self._pid)
        chan.close()


def connection_lost(transport) -> bool:
    """Whether the transport died. Not just `not is_active()`: paramiko's reader thread closes
    the channels (so a waiter sees exit status -1, as for a command killed by a signal) before
    it marks the transport inactive, but after it has stored the exception that ended it."""
    if not transport.is_active():
        return True
    e = transport.saved_exception
    return e is not None and type(e).__name__ != "ChannelException"  # that one: a refused channel only


def _send_signal(chan, name: str) -> None:
    """RFC 4254 "signal" request: OpenSSH >= 7.9 killpg()s the session's process group."""
    from paramiko.common import cMSG_CHANNEL_REQUEST
    from paramiko.message import Message

    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string("signal")
    m.add_boolean(False)
    m.add_string(name)
    try:
        chan.transport._send_user_message(m)
    except Exception:  # noqa: BLE001 - best effort on a dying channel
        pass


class SSHHost(Host):
    """A host reached over SSH as OpenSSH would reach `destination` (alias, user@host[:port]).

    Nothing happens until the first operation (or `connect()`), so constructing one is free and
    paramiko is not imported. Errors are `ConnectError` subclasses with one-line messages.
    `python` is the remote interpreter for the host's own helpers (the follower).
    """

    def __init__(
        self,
        destination: str,
        *,
        ssh_config_path: str | None = "~/.ssh/config",
        known_hosts_path: str | None = None,
        accept_new_host_key: bool | None = None,
        python: str = "python3",
        connect_timeout: float | None = None,
        keepalive: float | None = None,
        allow_agent: bool = True,
        look_for_keys: bool = True,
    ):
        self.name = destination
        self.python = python
        self._options = Options(
            destination=destination,
            ssh_config_path=ssh_config_path,
            known_hosts_path=known_hosts_path,
            accept_new_host_key=accept_new_host_key,
            connect_timeout=connect_timeout,
            keepalive=keepalive,
            allow_agent=allow_agent,
            look_for_keys=look_for_keys,
        )
        self._lock = threading.RLock()
        self._conn = None
        self._generation = 0  # +1 per connection made; a drop names the one that died

    def reach_files(self) -> dict[str, str]:
        import os

        opts, out = self._options, {}
        if opts.ssh_config_path and os.path.expanduser(opts.ssh_config_path) != os.path.expanduser("~/.ssh/config"):
            out["ssh_config"] = os.path.abspath(os.path.expanduser(opts.ssh_config_path))
        if opts.known_hosts_path:
            out["known_hosts"] = os.path.abspath(os.path.expanduser(opts.known_hosts_path))
        return out

    def address(self) -> str | None:
        from dynspec_cli.transport import sshconnect

        opts = self._options
        return sshconnect.resolve(opts.destination, sshconnect.load_config(opts.ssh_config_path), opts).hostname

    def connect(self) -> "SSHHost":
        """Connect now (raising ConnectError subclasses) instead of at the first operation."""
        self._connection()
        return self

    def _connection(self):
        """The live connection (made if needed) and its generation."""
        with self._lock:
            if self._conn is None or not self._conn.active() or connection_lost(self._conn.transport):
                if self._conn is not None:  # not closed by us: it died between two commands
                    self.drops.lost(self._generation, "connect", "the connection had died")
                self._drop()
                from dynspec_cli.transport import sshconnect

                self._conn = sshconnect.connect(self._options)
                self._generation += 1
                self.drops.reconnected()  # nothing unless a drop was being repaired
            return self._conn, self._generation

    def _connected(self) -> bool:
        conn = self._conn
        return conn is not None and conn.active()

    def _reconnect(self, *, force: bool = False, generation: int | None = None) -> None:
        with self._lock:
            if force:
                self._reconnect_later(generation)
            self.connect()

    def _reconnect_later(self, generation: int | None) -> None:
        with self._lock:
            if generation is None or generation == self._generation:
                self._drop()

    def _drop(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def close(self) -> None:
        self._drop()
        self.drops.forget_outage()

    def start_script(self, script: str, *, stdin: bool) -> Process:
        command = shell.envelope(script, report_pid=True)
        for attempt in (1, 2):
            conn, generation = self._connection()
            transport = conn.transport
            try:
                chan = transport.open_session(timeout=30)
                break
            except Exception as e:  # noqa: BLE001 - paramiko raises SSHException, EOFError, OSError
                # nothing ran yet, so trying once more on a fresh connection is safe. Unless sshd
                # refused the channel (MaxSessions), the connection is gone, even when paramiko's
                # reader thread has not noticed yet
                if type(e).__name__ != "ChannelException":
                    self.drops.lost(generation, "open a session", str(e) or type(e).__name__)
                if attempt == 2:
                    raise ConnectionLost(self.name, f"cannot open a session: {e or type(e).__name__}",
                                         may_have_run=False, generation=generation) from None
                self._reconnect_later(generation)
        try:
            chan.exec_command(command)
        except Exception as e:  # noqa: BLE001
            chan.close()
            # the exec request may have reached sshd before the connection died: it may be running
            raise ConnectionLost(self.name, f"cannot start a command: {e or type(e).__name__}",
                                 generation=generation) from None
        return SSHProcess(self, transport, chan, stdin=stdin, generation=generation)

    def _kill_group(self, transport, pgid: int) -> None:
        """SIGKILL a session's process group over a fresh channel of the same connection."""
        script = shell.call(shell.SIGNAL_GROUP, "KILL", str(int(pgid)))
        try:
            chan = transport.open_session(timeout=2)
            chan.exec_command(shell.envelope(script))
            chan.shutdown_write()
            chan.status_event.wait(5)
            chan.close()
        except Exception:  # noqa: BLE001 - best effort: the connection may be going away
            pass

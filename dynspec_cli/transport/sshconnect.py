"""Reaching an SSH host with paramiko the way OpenSSH would: ssh_config, ProxyJump, known_hosts.

This module imports paramiko (~170 ms, invoke deferred: see _defer_import); `ssh.SSHHost` imports
it only when it first connects.

What is honoured from ssh_config (`Include` is inlined first, since paramiko does not do it):
Host aliases/patterns, HostName, User, Port, IdentityFile, IdentitiesOnly, ProxyJump (comma
chains; a jump host's own ProxyJump is followed, as `ssh -J` does), ProxyCommand, HostKeyAlias,
UserKnownHostsFile, StrictHostKeyChecking accept-new, ConnectTimeout, ServerAliveInterval.
Keys: IdentityFile entries, else the default ~/.ssh/id_* keys, plus ssh-agent (unless
IdentitiesOnly). Password / keyboard-interactive auth is not attempted: this is a batch tool.

Host keys, from known_hosts as OpenSSH reads it (knownhosts.py: markers, hashed names, patterns,
several keys per host; UserKnownHostsFile and GlobalKnownHostsFile): a key marked @revoked ->
HostKeyRevoked; the server's key on any line for the host -> accepted; unknown -> HostKeyUnknown
unless accept-new (then appended to the first user file); another key (or only keys of another
type) -> HostKeyChanged, always; vouched for only by a @cert-authority line -> HostCertUnsupported
(paramiko does not negotiate host certificates). The server is asked for the key types known for
it first, as OpenSSH does.
"""
from __future__ import annotations

import getpass
import glob
import importlib
import importlib.util
import os
import re
import socket
import sys
import threading
import time
import types
from dataclasses import dataclass, field


def _defer_import(name: str) -> None:
    """Let `import name` succeed at once and load the real module at its first attribute access.
    paramiko.config imports invoke (~100 ms with its vendored yaml and unittest.mock, a tenth of
    preflight's SSH budget) only to run `Match exec` lines. importlib.util.LazyLoader does not do
    here: the import statement itself reads the module's __spec__, which loads it."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = types.ModuleType(name)
    stand_in.__spec__ = spec

    def load(attr):
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attr)

    stand_in.__getattr__ = load  # PEP 562: called for any attribute the stand-in lacks
    sys.modules[name] = stand_in


_defer_import("invoke")
import paramiko  # noqa: E402

from dynspec_cli.transport import knownhosts
from dynspec_cli.transport.errors import (
    AuthFailed,
    ConnectError,
    ConnectionClosed,
    ConnectionRefused,
    ConnectTimeout,
    HostCertUnsupported,
    HostKeyChanged,
    HostKeyError,
    HostKeyRevoked,
    HostKeyUnknown,
    HostNotFound,
    SSHConfigError,
)
from dynspec_cli.transport.ssh import Options

MAX_JUMPS = 8


@dataclass
class Target:
    """One hop, resolved through ssh_config."""

    spec: str  # as written (alias, user@host:port, ...)
    hostname: str
    port: int
    user: str
    identity_files: list[str]
    identities_only: bool
    proxy_jump: list[str]
    proxy_command: str | None
    host_key_alias: str | None
    known_hosts: str  # the user file accept-new writes to (the first)
    accept_new: bool
    connect_timeout: float
    keepalive: float
    known_hosts_files: list[str] = field(default_factory=list)  # every file read, user files first

    @property
    def label(self) -> str:
        where = f"{self.user}@{self.hostname}:{self.port}"
        return where if self.spec == where else f"{self.spec} ({where})"

    @property
    def key_name(self) -> str:
        """How known_hosts names this host."""
        if self.host_key_alias:
            return self.host_key_alias
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


@dataclass
class Connection:
    clients: list = field(default_factory=list)  # jump hosts first, the target last
    labels: list = field(default_factory=list)

    @property
    def transport(self) -> paramiko.Transport:
        return self.clients[-1].get_transport()

    def active(self) -> bool:
        return bool(self.clients) and all(
            (t := c.get_transport()) is not None and t.is_active() for c in self.clients
        )

    def close(self) -> None:
        for c in reversed(self.clients):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing a dead connection may fail any way
                pass
        self.clients.clear()
        self.labels.clear()


# --- destination and config ----------------------------------------------------------------------
_DEST = re.compile(r"^(?:ssh://)?(?:(?P<user>[^@/]+)@)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:/@]+))(?::(?P<port>\d+))?/?$")


def parse_destination(spec: str) -> tuple[str | None, str, int | None]:
    """`[ssh://][user@]host[:port]` (IPv6 as `[addr]`) -> (user, host, port)."""
    if not spec.isprintable():
        raise SSHConfigError(repr(spec), "a host name cannot contain a newline or another control character")
    m = _DEST.match(spec.strip())
    if not m:
        if spec.count(":") > 1 and "@" not in spec:  # bare IPv6 address
            return None, spec, None
        raise SSHConfigError(spec, "not an SSH destination; use alias, user@host or user@host:port")
    port = int(m["port"]) if m["port"] else None
    return m["user"], m["v6"] or m["host"], port


def load_config(path: str | None) -> paramiko.SSHConfig:
    if not path:
        return paramiko.SSHConfig()
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_text(_inline_includes(path, os.path.dirname(path), 0))
    except (OSError, paramiko.ConfigParseError) as e:
        raise SSHConfigError(path, f"cannot use ssh_config: {e}") from e


def _inline_includes(path: str, base: str, depth: int) -> str:
    if depth > 16:
        raise SSHConfigError(path, "Include nested too deeply (loop?)")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*include(?:\s*=\s*|\s+)(.+)", line, re.IGNORECASE)
            if not m:
                out.append(line)
                continue
            for pattern in m.group(1).split():
                pattern = os.path.expanduser(pattern)
                if not os.path.isabs(pattern):
                    pattern = os.path.join(base, pattern)
                for inc in sorted(glob.glob(pattern)):
                    out.append(_inline_includes(inc, base, depth + 1) + "\n")
    return "".join(out)


def resolve(spec: str, config: paramiko.SSHConfig, opts: Options) -> Target:
    user, host, port = parse_destination(spec)
    conf = config.lookup(host)

    def opt(key: str) -> str | None:
        v = conf.get(key)
        return None if v is None or str(v).lower() == "none" else str(v)

    try:
        port = port or int(conf.get("port", 22))
    except ValueError as e:
        raise SSHConfigError(spec, f"bad Port in ssh_config: {conf.get('port')!r}") from e
    jumps = opt("proxyjump")
    user_files = [opts.known_hosts_path] if opts.known_hosts_path else \
        (opt("userknownhostsfile") or "~/.ssh/known_hosts").split()
    global_files = (opt("globalknownhostsfile") or "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2").split()
    known = user_files[0]
    accept_new = opts.accept_new_host_key
    if accept_new is None:
        accept_new = (opt("stricthostkeychecking") or "").lower() == "accept-new"
    timeout = opts.connect_timeout or float(opt("connecttimeout") or 10)
    keepalive = opts.keepalive if opts.keepalive is not None else float(opt("serveraliveinterval") or 15)
    return Target(
        spec=spec,
        hostname=opt("hostname") or host,
        port=port,
        user=user or opt("user") or getpass.getuser(),
        identity_files=[os.path.expanduser(p) for p in conf.get("identityfile", [])],
        identities_only=(opt("identitiesonly") or "no").lower() == "yes",
        proxy_jump=[j.strip() for j in jumps.split(",") if j.strip()] if jumps else [],
        proxy_command=opt("proxycommand"),
        host_key_alias=opt("hostkeyalias"),
        known_hosts=os.path.expanduser(known),
        accept_new=accept_new,
        connect_timeout=timeout,
        keepalive=keepalive,
        known_hosts_files=[os.path.expanduser(p) for p in user_files + global_files],
    )


# --- host keys -----------------------------------------------------------------------------------
def fingerprint(key: paramiko.PKey) -> str:
    return knownhosts.fingerprint(key.get_name(), key.asbytes())


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Every host key decision. The client is given no host keys, so paramiko hands each server
    key here; known_hosts is read by knownhosts.py, not paramiko's HostKeys (see there why)."""

    def __init__(self, target: Target, entries: list):
        self.target = target
        self.entries = entries

    def missing_host_key(self, client, hostname, key):
        t = self.target
        name = t.key_name
        blob = key.asbytes()
        fp = fingerprint(key)
        d = knownhosts.check(self.entries, name, blob)
        if d.status == "unknown" and not t.host_key_alias and t.port != 22:
            # OpenSSH ("checking without port identifier"): a key recorded for the bare host name
            # is accepted on another port too, when nothing is recorded for [host]:port
            if knownhosts.check(self.entries, t.hostname, blob).status == "ok":
                return
        if d.status == "ok":
            return
        if d.status == "revoked":
            raise HostKeyRevoked(t.label, f"REVOKED host key for {name}: server offers {fp}, marked @revoked in "
                                          f"{d.entry.where}; refusing", fingerprint=fp, known_hosts=t.known_hosts)
        if d.status == "changed":
            raise HostKeyChanged(
                t.label,
                f"HOST KEY CHANGED for {name}: server offers {fp}, {d.entry.where} has {d.entry.fingerprint()}; "
                f"refusing (possible man-in-the-middle). If the change is expected: "
                f"ssh-keygen -R '{name}' -f {d.entry.path}",
                fingerprint=fp, known_hosts=t.known_hosts,
            )
        if d.status == "ca-only":
            raise HostCertUnsupported(
                t.label,
                f"{name} is vouched for only by the @cert-authority line {d.entry.where}; host certificates are not "
                f"supported (paramiko does not negotiate them). Add the host's own key after verifying it "
                f"(server offers {fp}): ssh-keyscan -p {t.port} {t.hostname} >> {t.known_hosts}",
                fingerprint=fp, known_hosts=t.known_hosts,
            )
        if not t.accept_new:
            note = ""
            if d.unreadable:
                note = f"; {d.unreadable[0].where} names it but its key cannot be read"
            raise HostKeyUnknown(
                t.label,
                f"unknown host key {fp} for {hostname} (not in {t.known_hosts}{note}); verify it, then add it "
                f"(ssh-keyscan -p {t.port} {t.hostname} >> {t.known_hosts}) or allow accept-new",
                fingerprint=fp, known_hosts=t.known_hosts,
            )
        os.makedirs(os.path.dirname(t.known_hosts) or ".", mode=0o700, exist_ok=True)
        fd = os.open(t.known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="ascii") as f:
            if f.tell() > 0 and not _ends_with_newline(t.known_hosts):
                f.write("\n")
            f.write(f"{name} {key.get_name()} {key.get_base64()}\n")


class _Transport(paramiko.Transport):
    """paramiko's Transport, keeping what the server said when it disconnected (paramiko only
    logs it): a server that closes with a reason ("Too many authentication failures") refused
    us; a connection that just ends was cut (see _cut)."""

    disconnect: str | None = None

    def _parse_disconnect(self, m):
        code, desc = m.get_int(), m.get_text()
        self.disconnect = f"the server disconnected: {desc} (code {code})"
        self._log(paramiko.common.INFO, self.disconnect)


def _cut(client) -> bool:
    """The connection ended after the server's SSH banner, without a disconnect message: a drop
    (sshd killed, the network), not an answer. Before the banner it may be no SSH server at all."""
    t = client.get_transport()
    return bool(t is not None and not t.is_active() and getattr(t, "remote_version", "")
                and getattr(t, "disconnect", None) is None)


def _transport_factory(key_types: list[str]):
    """paramiko.Transport asking for the host key types known for the host first (paramiko's
    SSHClient would do it only from its own HostKeys, which it is not given)."""
    def make(sock, disabled_algorithms=None):
        t = _Transport(sock, disabled_algorithms=disabled_algorithms)
        opts = t.get_security_options()
        offered = list(opts.key_types)
        first = []
        for kt in key_types:
            for alg in (("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa") if kt == "ssh-rsa" else (kt,)):
                if alg in offered and alg not in first:
                    first.append(alg)
        if first:
            opts.key_types = first + [a for a in offered if a not in first]
        return t

    return make


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


# --- connecting ----------------------------------------------------------------------------------
def connect(opts: Options) -> Connection:
    config = load_config(opts.ssh_config_path)
    conn = Connection()
    try:
        _connect_hop(opts.destination, config, opts, conn, via=None, depth=0)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_hop(spec: str, config, opts: Options, conn: Connection, *, via, depth: int) -> None:
    """Connect to spec (through the transport `via`, if given), appending clients to conn."""
    if depth > MAX_JUMPS:
        raise SSHConfigError(spec, f"more than {MAX_JUMPS} ProxyJump hops (a loop in ssh_config?)")
    target = resolve(spec, config, opts)
    if via is None and target.proxy_jump:
        # `ProxyJump a,b`: a is reached as configured (its own ProxyJump too), b through a, ...
        for i, hop in enumerate(target.proxy_jump):
            _connect_hop(hop, config, opts, conn, via=None if i == 0 else conn.transport, depth=depth + 1)
        via = conn.transport
    sock = _open_socket(target, via, conn)
    client = paramiko.SSHClient()
    conn.clients.append(client)  # closed with conn on failure
    conn.labels.append(target.label)
    try:
        entries = knownhosts.load(target.known_hosts_files)
    except OSError as e:
        raise SSHConfigError(target.label, f"cannot read known_hosts {e.filename}: {e.strerror}") from None
    client.set_missing_host_key_policy(HostKeyPolicy(target, entries))
    use_files = [p for p in target.identity_files if os.path.exists(p)]
    started = time.monotonic()
    try:
        client.connect(
            target.host_key_alias or target.hostname,
            port=22 if target.host_key_alias else target.port,
            username=target.user,
            sock=sock,
            key_filename=use_files or None,
            allow_agent=opts.allow_agent and not target.identities_only,
            look_for_keys=opts.look_for_keys and not target.identity_files,
            timeout=target.connect_timeout,
            banner_timeout=target.connect_timeout,
            auth_timeout=target.connect_timeout,
            channel_timeout=target.connect_timeout,
            transport_factory=_transport_factory(knownhosts.known_key_types(entries, target.key_name)),
        )
    except paramiko.BadAuthenticationType as e:
        raise AuthFailed(target.label, f"authentication failed for user {target.user}: server allows only "
                                       f"{', '.join(e.allowed_types)}") from None
    except paramiko.AuthenticationException as e:
        if _cut(client):  # paramiko says "Authentication failed" also when the connection just closed
            raise ConnectionClosed(target.label, f"connection closed during SSH authentication (by the server or "
                                                 f"the network, without a reason): {e}") from None
        tried = use_files or (["agent and ~/.ssh/id_* keys"] if opts.look_for_keys else ["agent keys"])
        missing = [p for p in target.identity_files if p not in use_files]
        note = f"; IdentityFile not found: {', '.join(missing)}" if missing else ""
        said = getattr(client.get_transport(), "disconnect", None)
        raise AuthFailed(target.label, f"authentication failed for user {target.user} "
                                       f"(tried {', '.join(tried)}){note}: {said or e}") from None
    except (HostKeyError, ConnectError):
        raise
    except (paramiko.SSHException, EOFError, OSError) as e:
        elapsed = time.monotonic() - started
        text = str(e) or type(e).__name__
        if elapsed >= target.connect_timeout * 0.9 or isinstance(e, (socket.timeout, TimeoutError)):
            # paramiko's start_client gives up silently at its timeout ("No existing session")
            raise ConnectTimeout(target.label, f"no SSH handshake within {target.connect_timeout:g}s "
                                               f"(is {target.hostname}:{target.port} an SSH server?)") from None
        if _cut(client):
            raise ConnectionClosed(target.label, f"connection closed during the SSH handshake (by the server or "
                                                 f"the network, without a reason): {text}") from None
        if "no authentication methods available" in text.lower():
            raise AuthFailed(target.label, f"no key to offer for user {target.user} (no usable IdentityFile, "
                                           f"no ssh-agent, no ~/.ssh/id_* keys)") from None
        if "banner" in text.lower() or isinstance(e, EOFError):
            raise ConnectError(target.label, f"connection closed during SSH handshake "
                                             f"(not an SSH server, or sshd MaxStartups?): {text}") from None
        raise ConnectError(target.label, f"SSH negotiation failed: {text}") from None
    transport = client.get_transport()
    _inactive_when_reader_ends(transport)
    if target.keepalive:
        transport.set_keepalive(max(1, int(target.keepalive)))


def _inactive_when_reader_ends(transport) -> None:
    """Mark the transport inactive once its reader thread has ended. paramiko's reader, when the
    connection dies, unlinks the channels before it clears `active`; a channel that open_session
    registered but has not yet bound to the transport makes that unlink raise, the thread ends with
    `active` still True, and open_session (which polls `active`) waits its whole timeout (30 s)
    instead of failing at once (seen in CI: a dropped connection, then a channel opened on it)."""
    def watch() -> None:
        transport.join()
        transport.active = False

    threading.Thread(target=watch, name="dynspec-ssh-reader-watch", daemon=True).start()


def _open_socket(target: Target, via, conn: Connection):
    addr = (target.hostname, target.port)
    if via is not None:
        try:
            return via.open_channel("direct-tcpip", addr, ("127.0.0.1", 0), timeout=target.connect_timeout)
        except paramiko.ChannelException as e:
            why = e.text or "connect failed"
            hop = f"jump host {conn.labels[-1]}"
            if e.code == paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED:
                raise ConnectError(target.label, f"{hop} refuses forwarding: {why}") from None
            if re.search(r"resolve|name or service|not known", why, re.IGNORECASE):
                raise HostNotFound(target.label, f"{hop} cannot resolve {target.hostname}: {why}") from None
            raise ConnectionRefused(target.label, f"{hop} cannot connect to "
                                                  f"{target.hostname}:{target.port}: {why}") from None
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise ConnectError(target.label, f"jump host connection failed: {e}") from None
    if target.proxy_command:
        try:
            return paramiko.ProxyCommand(target.proxy_command)
        except Exception as e:  # noqa: BLE001 - ProxyCommand raises a variety
            raise ConnectError(target.label, f"ProxyCommand failed to start: {e}") from None
    try:
        return socket.create_connection(addr, timeout=target.connect_timeout)
    except socket.gaierror as e:
        raise HostNotFound(target.label, f"cannot resolve {target.hostname}: {e.strerror}") from None
    except ConnectionRefusedError:
        raise ConnectionRefused(target.label, f"connection refused by {target.hostname}:{target.port} "
                                              f"(no sshd listening?)") from None
    except (socket.timeout, TimeoutError):
        raise ConnectTimeout(target.label, f"no TCP connection to {target.hostname}:{target.port} within "
                                           f"{target.connect_timeout:g}s") from None
    except OSError as e:
        raise ConnectError(target.label, f"cannot reach {target.hostname}:{target.port}: "
                                         f"{e.strerror or e}") from None

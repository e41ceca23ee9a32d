"""Errors of the transport layer: one class per kind, each a one-line message naming the host.

Callers catch `TransportError` for "the host could not be used" and a subclass when they want to
say something specific (e.g. a fix for `HostKeyUnknown`). Messages never contain env values.
"""
from __future__ import annotations


class TransportError(Exception):
    """Base class. `host` names the host (alias or user@host:port) the error is about."""

    def __init__(self, host: str, message: str):
        super().__init__(f"{host}: {message}")
        self.host = host
        self.detail = message


# --- reaching the host ---------------------------------------------------------------------------
class ConnectError(TransportError):
    """The connection (or one hop of a ProxyJump chain) could not be established."""


class HostNotFound(ConnectError):
    """DNS (or /etc/hosts) has no address for the host name."""


class ConnectionRefused(ConnectError):
    """Nothing listens on the port (or a jump host could not open a channel to it)."""


class ConnectTimeout(ConnectError):
    """TCP connect, SSH banner or handshake did not complete in time."""


class AuthFailed(ConnectError):
    """The server rejected every key we offered."""


class ConnectionClosed(ConnectError):
    """The connection was closed while it was being made (banner, key exchange, authentication)
    without the server saying why: what a drop looks like then. Tried again like any drop."""


class HostKeyError(ConnectError):
    """The server's host key could not be verified against known_hosts."""

    def __init__(self, host: str, message: str, *, fingerprint: str, known_hosts: str):
        super().__init__(host, message)
        self.fingerprint = fingerprint
        self.known_hosts = known_hosts


class HostKeyUnknown(HostKeyError):
    """known_hosts has no key for this host (refused unless accept_new_host_key)."""


class HostKeyChanged(HostKeyError):
    """known_hosts has a different key for this host (always refused)."""


class HostKeyRevoked(HostKeyError):
    """known_hosts marks the server's key `@revoked` (refused, even if another line lists it)."""


class HostCertUnsupported(HostKeyError):
    """Only a `@cert-authority` line vouches for this host; dynspec cannot check host certificates."""


class SSHConfigError(ConnectError):
    """The ssh_config could not be used (unsupported option, ProxyJump loop, bad destination)."""


# --- using the host ------------------------------------------------------------------------------
class ConnectionLost(TransportError):
    """An established connection died under a command.

    may_have_run: False when the command cannot have reached the host (no session could be
    opened), so even a non-idempotent one may be tried again. generation: which connection of
    the host died (one drop is counted once, however many calls saw it)."""

    def __init__(self, host: str, message: str, *, may_have_run: bool = True, generation: int | None = None):
        super().__init__(host, message)
        self.may_have_run = may_have_run
        self.generation = generation


class CommandTimeout(TransportError):
    """A command ran longer than its timeout; it was killed. Partial output is attached."""

    def __init__(self, host: str, message: str, *, stdout: bytes = b"", stderr: bytes = b""):
        super().__init__(host, message)
        self.stdout = stdout
        self.stderr = stderr


class CommandFailed(TransportError):
    """A command exited non-zero where success was required. `result` holds its output."""

    def __init__(self, host: str, message: str, result):
        super().__init__(host, message)
        self.result = result


class SpawnFailed(TransportError):
    """spawn_detached could not start the process (command not found, log not writable, ...)."""


class FollowError(TransportError):
    """The follower reported an error (or could not be started, or kept dying)."""

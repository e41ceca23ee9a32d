"""How a host is reached: one `Host` interface, a local and an SSH implementation.

    from dynspec_cli.transport import open_host
    with open_host("gpu-box") as host:          # "local", an ssh_config alias, or user@host:port
        host.run(["nvidia-smi"], timeout=30)
        for ev in host.follow("/var/log/sglang.log", offset=host.size(...) or 0): ...

Importing this package does not import paramiko; only connecting over SSH does.
"""
from __future__ import annotations

from dynspec_cli.transport.errors import (
    AuthFailed,
    CommandFailed,
    CommandTimeout,
    ConnectError,
    ConnectionClosed,
    ConnectionLost,
    ConnectionRefused,
    ConnectTimeout,
    FollowError,
    HostCertUnsupported,
    HostKeyChanged,
    HostKeyError,
    HostKeyRevoked,
    HostKeyUnknown,
    HostNotFound,
    SpawnFailed,
    SSHConfigError,
    TransportError,
)
from dynspec_cli.transport.follow import Event, Follow
from dynspec_cli.transport.host import Host, Result, Spawned
from dynspec_cli.transport.local import LocalHost
from dynspec_cli.transport.ssh import SSHHost


def open_host(spec: str, **ssh_options) -> Host:
    """`local` (or empty) -> LocalHost; anything else -> SSHHost(spec, **ssh_options)."""
    if spec in ("", "local"):
        return LocalHost(python=ssh_options.get("python"))
    return SSHHost(spec, **ssh_options)


__all__ = [
    "AuthFailed", "CommandFailed", "CommandTimeout", "ConnectError", "ConnectionClosed", "ConnectionLost",
    "ConnectionRefused", "ConnectTimeout", "Event", "Follow", "FollowError", "Host", "HostCertUnsupported",
    "HostKeyChanged", "HostKeyError", "HostKeyRevoked", "HostKeyUnknown", "HostNotFound", "LocalHost",
    "Result", "SSHConfigError", "SSHHost", "SpawnFailed", "Spawned", "TransportError", "open_host",
]

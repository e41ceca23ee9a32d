"""known_hosts read as OpenSSH reads it (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT"; hostfile.c).

Not paramiko's HostKeys, which fails on the whole file at any `@cert-authority` or `@revoked` line
("Incorrect padding": it takes the marker for the host names), keeps one key per host and key type
(so a stale entry before the right one reads as a changed key), and knows no negated patterns.

A line: `[@marker] hostnames keytype base64-key [comment]`. hostnames is a comma-separated list of
patterns (`*` and `?` wildcards; `!pattern` excludes the line for hosts it matches; `[host]:port`
for a port other than 22) or one hashed name `|1|base64-salt|base64-HMAC-SHA1(host)`. Host names
compare case-insensitively. Blank lines, `#` comments and lines that cannot be read are skipped,
as OpenSSH does, so one bad line never makes other hosts fail.

The decision (`check`), as OpenSSH's check_key_in_hostkeys: among the lines naming the host, a
`@revoked` line with the server's key refuses it whatever else is there; else a plain line with
the server's key accepts it (any of several); else a plain line with another key means the key
changed; else the host is unknown. `@cert-authority` lines vouch for host certificates, which
paramiko does not negotiate, so a host only a CA line vouches for is reported as such.

Importing this module does not import paramiko.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Iterable, Optional

CA = "@cert-authority"
REVOKED = "@revoked"
HASH_MAGIC = "|1|"


@dataclass(frozen=True)
class Entry:
    path: str
    line: int
    marker: Optional[str]  # CA, REVOKED or None
    names: str  # the hostnames field as written
    key_type: str
    blob: Optional[bytes]  # the key as sent on the wire; None: the line's key cannot be read

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def fingerprint(self) -> str:
        return fingerprint(self.key_type, self.blob or b"")


def fingerprint(key_type: str, blob: bytes) -> str:
    """`ED25519 SHA256:...`, as `ssh-keygen -l` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    short = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ssh-dss": "DSA"}.get(key_type)
    if short is None:
        short = "ECDSA" if key_type.startswith("ecdsa-") else key_type.upper()
    return f"{short} SHA256:{digest}"


def parse(text: str, path: str) -> list[Entry]:
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        marker = None
        if fields[0].startswith("@"):
            if fields[0] not in (CA, REVOKED):
                continue  # OpenSSH: an unknown marker makes the line invalid
            marker, fields = fields[0], fields[1:]
        if len(fields) < 3:
            continue
        names, key_type, b64 = fields[:3]
        out.append(Entry(path, no, marker, names, key_type, _blob(key_type, b64)))
    return out


def _blob(key_type: str, b64: str) -> Optional[bytes]:
    """The decoded key if it is one of type key_type (its wire form starts with that name)."""
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(blob) < 4:
        return None
    (n,) = struct.unpack(">I", blob[:4])
    if blob[4:4 + n] != key_type.encode("ascii", "replace"):
        return None
    return blob


def load(paths: Iterable[str]) -> list[Entry]:
    """Every line of every file that exists (missing files are no error, as for OpenSSH).
    Raises OSError for a file that exists but cannot be read."""
    out: list[Entry] = []
    for p in paths:
        path = os.path.expanduser(p)
        if path == os.devnull or not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            out += parse(f.read(), path)
    return out


def name_matches(names: str, host: str) -> bool:
    """Whether the hostnames field `names` covers `host` (`name` or `[name]:port`)."""
    host = host.lower()
    if names.startswith(HASH_MAGIC):
        return _hash_matches(names, host)
    positive = False
    for pattern in names.split(","):
        negated = pattern.startswith("!")
        if _glob(pattern[1:] if negated else pattern).fullmatch(host):
            if negated:
                return False  # a negated match excludes the line whatever else matches
            positive = True
    return positive


def _hash_matches(names: str, host: str) -> bool:
    try:
        salt_b64, digest_b64 = names[len(HASH_MAGIC):].split("|", 1)
        salt, digest = base64.b64decode(salt_b64, validate=True), base64.b64decode(digest_b64, validate=True)
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(hmac.new(salt, host.encode(), hashlib.sha1).digest(), digest)


def _glob(pattern: str) -> re.Pattern:
    """OpenSSH's match_pattern: `*` any run, `?` one character, nothing else special (so the
    brackets of `[host]:port` are literal)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()),
                      re.DOTALL)


@dataclass
class Decision:
    """status: ok | revoked | changed | ca-only | unknown. entry: the line that decided (the
    revoking line, the accepting line, a line with the other key, the CA line)."""

    status: str
    entry: Optional[Entry] = None
    unreadable: list[Entry] = field(default_factory=list)  # lines naming the host whose key is unreadable


def for_host(entries: Iterable[Entry], host: str) -> list[Entry]:
    return [e for e in entries if name_matches(e.names, host)]


def check(entries: Iterable[Entry], host: str, blob: bytes) -> Decision:
    mine = for_host(entries, host)
    readable = [e for e in mine if e.blob is not None]
    unreadable = [e for e in mine if e.blob is None]
    for e in readable:
        if e.marker == REVOKED and e.blob == blob:
            return Decision("revoked", e, unreadable)
    plain = [e for e in readable if e.marker is None]
    for e in plain:
        if e.blob == blob:
            return Decision("ok", e, unreadable)
    ca = [e for e in readable if e.marker == CA]
    if ca:
        return Decision("ca-only", ca[0], unreadable)
    if plain:
        return Decision("changed", plain[0], unreadable)
    return Decision("unknown", None, unreadable)


def known_key_types(entries: Iterable[Entry], host: str) -> list[str]:
    """Key types of the plain (unmarked, not revoked) lines for host, in file order: the host key
    algorithms to ask the server for first, as OpenSSH does, so a host known by its RSA key is
    not asked for its ed25519 one."""
    mine = for_host(entries, host)
    revoked = {e.blob for e in mine if e.marker == REVOKED}
    out: list[str] = []
    for e in mine:
        if e.marker is None and e.blob is not None and e.blob not in revoked and e.key_type not in out:
            out.append(e.key_type)
    return out

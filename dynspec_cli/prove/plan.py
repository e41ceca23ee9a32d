"""What `dynspec prove` runs: the threshold, the concurrency steps and their bounds; and the small
parsers shared with `dynspec gate` (ages such as `90s`, `30m`, `1h`)."""
from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass
from typing import Optional, Sequence

DEFAULT_STEPS = "1,N,N+1,2N"
_STEP = re.compile(r"^(?:(?P<int>\d+)|(?P<k>\d*)\s*\*?\s*N\s*(?:(?P<sign>[+-])\s*(?P<off>\d+))?)$", re.I)
_AGE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>s|sec|m|min|h|d)?\s*$", re.I)
_UNIT = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


class PlanError(Exception):
    """Bad input to prove or gate (one line; exit 2)."""


@dataclass(frozen=True)
class Plan:
    threshold: Optional[int]  # None: the feature has none (speculation expected on at every batch)
    threshold_source: str  # --threshold | argv | marker | server_info | none
    steps: tuple[int, ...]  # client concurrency per step
    duration: float  # seconds of traffic per step
    max_requests: int  # requests per step (0: no bound)
    max_new_tokens: int


def threshold_from_argv(argv: Sequence[str], flag: str) -> Optional[int]:
    """The value of `flag` in a server command line (evidence/argv.py flag_value: the last one
    wins, as with argparse); PlanError (one line) when it is no integer."""
    from dynspec_cli.evidence.argv import flag_value

    value = flag_value(argv, flag)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise PlanError(f"{flag} {value!r} in the run's command line is not an integer") from None


def parse_steps(text: str, threshold: int) -> tuple[int, ...]:
    """`1,N,N+1,2N` with N = threshold; plain integers too. Order kept, duplicates dropped."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = _STEP.match(part)
        if not m:
            raise PlanError(f"--steps: {part!r} is not an integer or an expression of N (like N, N+1, 2N)")
        if m.group("int") is not None:
            n = int(m.group("int"))
        else:
            n = int(m.group("k") or 1) * threshold
            if m.group("off"):
                n += int(m.group("off")) * (1 if m.group("sign") == "+" else -1)
        if n < 1:
            raise PlanError(f"--steps: {part!r} gives concurrency {n} with N={threshold}; each step needs at least 1")
        if n not in out:
            out.append(n)
    if not out:
        raise PlanError("--steps: no step given")
    return tuple(out)


def parse_age(text: str) -> float:
    """Seconds from `90s`, `30m`, `1h`, `2d` or a bare number of seconds."""
    m = _AGE.match(text or "")
    if not m:
        raise PlanError(f"--max-age {text!r}: expected a number with s, m, h or d (like 90s, 30m, 1h)")
    return float(m.group("n")) * _UNIT[(m.group("unit") or "s").lower()]


def format_age(seconds: float) -> str:
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


def loopback_base(url: str) -> str:
    """`http://127.0.0.1:30000` from a URL whose host is a loopback address (or `localhost`);
    anything else is refused: load goes only to a server on this machine."""
    p = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    if p.scheme not in ("http", "https"):
        raise PlanError(f"--url {url!r}: only http:// and https:// URLs")
    host = p.hostname or ""
    ok = host == "localhost"
    if not ok:
        try:
            ok = ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = False
    if not ok:
        raise PlanError(f"--url {url!r}: only loopback addresses (127.0.0.0/8, ::1, localhost) are accepted; "
                        f"for a remote server use a run name with --host")
    try:
        port = p.port
    except ValueError:
        raise PlanError(f"--url {url!r}: bad port") from None
    netloc = f"[{host}]" if ":" in host else host
    return f"{p.scheme}://{netloc}" + (f":{port}" if port else "")

"""Launch commands inside a log: `python -m sglang.launch_server ...`, `sglang serve ...`, or the
same inside a docker/k8s `args:` block, continued over several lines with a trailing backslash.
They say what the user requested (configs/sglang/launch_flags.toml says how to read them)."""
from __future__ import annotations

import functools
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sglang" / "launch_flags.toml"


@dataclass(frozen=True)
class FlagSpec:
    dest: str
    names: tuple[str, ...]
    type: str


@functools.lru_cache(maxsize=None)
def _config() -> tuple[re.Pattern, dict[str, FlagSpec], re.Pattern]:
    d = tomllib.loads(CONFIG.read_text())
    by_name = {}
    for f in d["flag"]:
        spec = FlagSpec(f["dest"], tuple(f["names"]), f["type"])
        for n in spec.names:
            by_name[n] = spec
    return re.compile(d["command"]), by_name, re.compile(d["usage"])


def parse_flags(text: str) -> dict[str, Any]:
    """The flags of `launch_flags.toml` found in a command's text, by dest."""
    _, by_name, _ = _config()
    try:
        tokens = shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote in a pasted command
        tokens = text.split()
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, _, inline = tok.partition("=")
        spec = by_name.get(name)
        if spec is None:
            i += 1
            continue
        if spec.type == "bool":
            out[spec.dest] = True
            i += 1
            continue
        value = inline if inline else (tokens[i + 1] if i + 1 < len(tokens) else None)
        i += 1 if inline else 2
        if value is None or value.startswith("--"):
            continue
        if spec.type == "int":
            try:
                out[spec.dest] = int(value)
            except ValueError:
                continue  # a shell variable ($TP) is not a value
        else:
            out[spec.dest] = value
    return out


@dataclass
class CommandReader:
    """Fed one message at a time: returns the flags a launch-command line (or one of its
    continuation lines) adds, `None` for any other line."""

    continued: bool = False

    def feed(self, msg: str) -> Optional[tuple[str, dict[str, Any]]]:
        if self.continued:
            body = msg.rstrip()
            if not body.lstrip().startswith("-") and " --" not in body:
                self.continued = False  # the command ended; this is a log line of its own
                return self.feed(msg)
            self.continued = body.endswith("\\")
            return "command-cont", parse_flags(body.rstrip("\\"))
        if "launch_server" not in msg and "sglang serve" not in msg:
            return None
        rx, _, usage = _config()
        m = rx.search(msg)
        if not m or usage.search(msg, m.end()):
            return None
        body = msg[m.end():].rstrip()
        self.continued = body.endswith("\\")
        return "command", parse_flags(body.rstrip("\\"))

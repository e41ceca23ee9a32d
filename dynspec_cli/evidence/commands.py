"""Launch commands inside a log: `python -m sglang.launch_server ...`, `sglang serve ...`,
`vllm serve MODEL ...`, the same inside a docker/k8s `args:` block, continued over several lines
with a trailing backslash, one flag per line without one, or a k8s `args:` list (`- --flag` and
its value as the next item); and launch flags pasted on their own lines without the command head.
They say what the user requested; each engine's `launch_flags.toml` (in its tables folder, given
by the engine's rules) says how to read them."""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Optional

import msgspec

from dynspec_cli.knowledge import tables
from dynspec_cli.knowledge.tables import regex

_LIST_ITEM = re.compile(r"^-\s+")  # a YAML list item: `- --tp` / `- "8"`


class FlagSpec(msgspec.Struct, frozen=True):  # msgspec Structs, not dataclasses: a dataclass costs `verify` ~0.7 ms of start-up to build
    dest: str
    names: tuple[str, ...]
    type: str  # str | int | bool | json


class Flags(msgspec.Struct, frozen=True):
    command: str  # regex of a command head (compiled once a line holds a hint)
    by_name: dict[str, FlagSpec]
    hint: tuple[str, ...]  # substrings every command head contains (a cheap skip)
    usage: Optional[str]  # regex: after a head, the engine's usage text, not a launch


@functools.lru_cache(maxsize=None)
def flags_of(tables_dir: Path) -> Flags:
    """The launch_flags.toml of an engine's tables folder, parsed once per change of it (tables.cached)."""
    path = tables_dir / "launch_flags.toml"
    return tables.cached(f"flags-{tables_dir.name}", [path, Path(__file__)], lambda: _build_flags(path))


def _build_flags(path: Path) -> Flags:
    from dynspec_cli.resources import tomllib

    d = tomllib.loads(path.read_text())
    by_name = {}
    for f in d["flag"]:
        spec = FlagSpec(f["dest"], tuple(f["names"]), f["type"])
        for n in spec.names:
            by_name[n] = spec
    return Flags(d["command"], by_name, tuple(d["hint"]), d.get("usage"))


def _tokens(text: str) -> list[str]:
    import shlex

    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote in a pasted command
        return text.split()


def _value(spec: FlagSpec, raw: str) -> Any:
    """The flag's value, or None when the text is no value of its type (a shell variable, $TP)."""
    if spec.type == "int":
        try:
            return int(raw)
        except ValueError:
            return None
    if spec.type == "json":
        import json

        try:
            v = json.loads(raw)
        except ValueError:
            return None
        return v if isinstance(v, dict) else None
    return raw


def parse_flags(text: str, tables_dir: Path) -> dict[str, Any]:
    """The flags of an engine's `launch_flags.toml` (in `tables_dir`) found in a command's text, by dest."""
    return _parse(_tokens(text), flags_of(tables_dir))[0]


def _parse(tokens: list[str], fl: Flags) -> tuple[dict[str, Any], Optional[FlagSpec]]:
    """(flags, the flag whose value is still to come: the last token was a flag needing one)."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        name, eq, inline = tokens[i].partition("=")
        spec = fl.by_name.get(name)
        if spec is None:
            i += 1
            continue
        if spec.type == "bool":
            out[spec.dest] = True
            i += 1
            continue
        if not eq and i + 1 >= len(tokens):
            return out, spec
        raw = inline if eq else tokens[i + 1]
        i += 1 if eq else 2
        if raw.startswith("--"):
            i -= 1  # that was the next flag, not a value
            continue
        value = _value(spec, raw)
        if value is not None:
            out[spec.dest] = value
    return out, None


class CommandReader:
    """Fed one message at a time: returns ("command", flags) for a launch-command line,
    ("command-cont", flags) for a line that continues one or a line of launch flags on its own,
    `None` for any other line."""

    def __init__(self, tables_dir: Path) -> None:
        self.tables_dir = tables_dir  # the engine's tables (its launch_flags.toml)
        self.flags: Optional[Flags] = None  # read at the first line
        self.continued = False  # the last command line ended in a backslash
        self.active = False  # a command (or a run of flag lines) is being read
        self.pending: Optional[FlagSpec] = None  # a k8s list item whose value is the next item

    def feed(self, msg: str) -> Optional[tuple[str, dict[str, Any]]]:
        fl = self.flags or self._load()
        if not (self.continued or self.active or self.pending is not None) and "--" not in msg and not any(h in msg for h in fl.hint):
            return None  # (most lines: neither a command nor flags, and nothing being read)
        body = msg.strip()
        item = _LIST_ITEM.sub("", body, count=1)
        if self.pending is not None:  # the value of the flag on the item before
            spec, self.pending = self.pending, None
            toks = _tokens(item)
            value = _value(spec, toks[0]) if toks else None
            if value is not None:
                return "command-cont", {spec.dest: value}
        if any(h in msg for h in fl.hint) and (m := regex(fl.command).search(msg)):
            if fl.usage is not None and regex(fl.usage).search(msg, m.end()):
                self.active = self.continued = False
                return None
            return "command", self._read(msg[m.end():], fl)
        if self.continued or (self.active and item.startswith("-")):
            return "command-cont", self._read(item, fl)
        if item.startswith("--"):  # launch flags on their own, without the command head
            flags = self._read(item, fl)
            if flags or self.pending is not None:
                return "command-cont", flags
        self.active = self.continued = False
        self.pending = None
        return None

    def _load(self) -> Flags:
        self.flags = flags_of(self.tables_dir)
        return self.flags

    def _read(self, text: str, fl: Flags) -> dict[str, Any]:
        text = text.rstrip()
        self.continued = text.endswith("\\")
        flags, self.pending = _parse(_tokens(text.rstrip("\\")), fl)
        self.active = True
        return flags

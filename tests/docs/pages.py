"""The user-facing pages (README.md, docs/*.md) and the command lines they show."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


class Block(NamedTuple):
    lang: str
    start: int  # 1-based line of its first content line
    lines: list[str]


def fenced(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text (``` fences; an indented fence too, as in a list)."""
    out, cur = [], None
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if cur is None and stripped.startswith("```"):
            cur = Block(stripped[3:].strip(), no + 1, [])
        elif cur is not None and stripped.startswith("```"):
            out.append(cur)
            cur = None
        elif cur is not None:
            cur.lines.append(line)
    return out


def prose(text: str) -> str:
    """The text outside fenced blocks (blocks blanked, so line numbers stay)."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            lines.append("")
        else:
            lines.append("" if inside else line)
    return "\n".join(lines)


class Cmd(NamedTuple):
    where: str  # page:line
    text: str  # as written
    argv: list[str]  # the words after `dynspec`
    exact: bool  # a runnable line (a code block), not a synopsis with placeholders (inline code)


def _segments(line: str, exact: bool) -> Iterator[list[str]]:
    """Each simple command of a shell line (split at && || ; |), as words; comments dropped."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    words: list[str] = []
    for tok in lex:
        if tok and set(tok) <= set(";&|"):
            yield words
            words = []
        else:
            words.append(tok)
    yield words


def _commands(line: str, where: str, exact: bool) -> Iterator[Cmd]:
    for words in _segments(line, exact):
        if len(words) >= 2 and words[0] == "dynspec":
            argv = words[1:] if exact else [w.strip("[]") for w in words[1:] if w.strip("[]")]
            yield Cmd(where, line.strip(), argv, exact)


def _joined(lines: list[str], start: int) -> Iterator[tuple[int, str]]:
    """Lines with their backslash continuations joined, each with the line it starts on."""
    buf, first = "", None
    for i, line in enumerate(lines):
        if first is None:
            first = start + i
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield first, buf + line
        buf, first = "", None
    if first is not None:
        yield first, buf


def commands(path: Path) -> list[Cmd]:
    """Every `dynspec ...` command line of a page: in shell blocks every line, in text blocks the
    lines after a `$ ` prompt (the rest is output), in the prose every inline code span that starts
    with `dynspec `."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(ROOT).as_posix()
    out: list[Cmd] = []
    for b in fenced(text):
        if b.lang in ("bash", "sh", "shell", "console"):
            for no, line in _joined(b.lines, b.start):
                line = line.strip()
                if b.lang == "console" and not line.startswith("$ "):
                    continue
                out += _commands(line.removeprefix("$ "), f"{name}:{no}", True)
        elif b.lang in ("text", ""):
            for no, line in _joined(b.lines, b.start):
                if line.startswith("$ "):
                    out += _commands(line[2:], f"{name}:{no}", True)
    body = prose(text)
    for m in re.finditer(r"`(dynspec [^`]+)`", body):  # a span may wrap onto the next line
        no = body.count("\n", 0, m.start()) + 1
        out += _commands(" ".join(m.group(1).split()), f"{name}:{no}", False)
    return out

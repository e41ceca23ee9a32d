"""Turning raw log bytes into messages as sglang wrote them.

Real logs carry more than sglang's own `[date time( DPn)( TPn)...] message`: bare lines from
before logging is configured (< 0.5.11), wrappers added by the user's environment (docker
compose `svc  | `, Kubernetes CRI `...Z stderr F `, Ray `(Worker pid=..)`, pm2 `3|app  | `, journald,
log-viewer exports, Markdown quote marks and inline-code backticks of pasted logs), logging's default
`WARNING:sglang.srt.server_args:` form, level/file tags such as `WARNING server_args.py:2386:`,
ANSI colours (also pasted as text: `^[[1;36m`, `\\u001b[36m`), CRLF (also `^M`), tqdm fragments
glued to a line with `\\r`, invalid UTF-8."""
from __future__ import annotations

import re
import msgspec

from dynspec_cli.knowledge.tables import regex

# ANSI codes (this and the next are compiled when a line holds one)
_ANSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]"
# The same codes pasted as text: caret notation (`^[[1;36m`, as `cat -v` and less show them) and
# JSON's escape (`\u001b[36m`, log collectors that store lines as JSON strings).
_ANSI_TEXT = r"(?:\^\[|\\u001[bB])\[[0-9;?]*[ -/]*[@-~]"
WRAPPER_PATTERNS = (  # also read by evidence/detect.py, one by one
    # Kubernetes CRI: 2026-02-27T19:49:17.123456789Z stderr F msg
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [FP] ",
    # docker compose: service-name-1  | msg
    r"^[A-Za-z0-9][\w.-]*\s+\| ?",
    # Ray: (Worker pid=123) / (SchedulerActor pid=1, ip=10.0.0.1) msg
    r"^\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.:a-fA-F]+)?\) ?",
    # docker logs --timestamps: 2026-02-27T19:49:17.123456789Z msg
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ",
    # pm2: 3|qwen  | msg
    r"^\d+\|[\w.@-]+\s*\| ?",
    # a log viewer's table export (Grafana/Loki), often quoted: >  \t \t2025-03-11 09:51:41.193\tmsg\t
    r"^>?\s*\t \t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\t",
    # Markdown quote mark of a pasted log: > msg
    r"^> ?(?=\S)",
    # inline-code backtick glued to the first line of a paste: `[2025-04-11 ...] msg
    r"^`+(?=\S)",
    # journald / syslog: Jul 10 03:06:31 host python3[1234]: msg
    r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w.@/-]+(?:\[\d+\])?: ",
    # sglang's prefix with its "[" lost in a paste: 2026-01-13 04:50:49 DP3 TP3] msg
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: [A-Z_]+\d+)*\] ",
    # sglang's short prefix (multimodal_gen and some entry points): [12-16 14:27:08] msg
    r"^\[\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\] ?",
)
_WRAPPER = re.compile("|".join(f"(?:{w})" for w in WRAPPER_PATTERNS))  # the first that matches, in one scan
_SGLANG_PREFIX = re.compile(
    r"^\[(?P<ts>(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)(?P<tags>(?: [A-Z_]+\d+)*)\] ?"
    # 2024 builds wrote the time only: "[18:19:55 TP0] Decode batch. ..."
    # a custom logging config (SGLANG_LOGGING_CONFIG_PATH): "2026-03-18 11:22:05.874 INFO 120984 [ TP0 file.py:415] msg"
    r"|^(?P<ts2>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d+ "
    r"\[(?P<tags2>(?: ?[A-Z_]+\d+)*) [\w./-]+\.py:\d+\] ?"
)
_TAG = re.compile(r"([A-Z_]+?)(\d+)")
_LEVEL_FORMS = (
    # WARNING server_args.py:2386: msg   (custom logging formats)
    re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) +[\w./-]+\.py:\d+: ?"),
    # WARNING:sglang.srt.server_args:msg   (logging.basicConfig default)
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:"),
    # INFO:     msg   (uvicorn)
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+"),
    # 2026-02-27 19:49:17,123 - WARNING - msg / 2026-... WARNING msg
    re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? *-? *(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) *-? *"),
)


class Line(msgspec.Struct, dict=True):  # msgspec Structs, not dataclasses: a dataclass costs `verify` ~0.7 ms of start-up to build
    """One message. `no` is the 1-based physical line number in the file (0 if unknown),
    `offset` the byte offset where the physical line starts."""

    no: int
    offset: int
    text: str  # the physical line, decoded, without ANSI codes and line ending
    msg: str  # the message, wrappers and prefixes removed
    ts: str | None = None
    ranks: dict[str, int] = {}

    @property
    def rank_label(self) -> str:
        return " ".join(f"{k}{v}" for k, v in self.ranks.items())


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def strip_noise(text: str) -> str:
    if "\x1b" in text:
        text = regex(_ANSI).sub("", text)
    if "^[" in text or "\\u001" in text:
        text = regex(_ANSI_TEXT).sub("", text)
    if "^M" in text:  # a carriage return in caret notation: a line end, or tqdm's redraw mid-line
        text = text.replace("^M", "\r")
    return text.rstrip("\r\n")


def parse_message(segment: str) -> tuple[str, str | None, dict[str, int]]:
    """Strip wrappers and prefixes from one segment; return (msg, timestamp, ranks)."""
    s = segment
    ts = None
    ranks: dict[str, int] = {}
    for _ in range(4):  # wrappers may nest (compose around k8s around ...)
        before = s
        m = _SGLANG_PREFIX.match(s)
        if m:
            ts = m.group("ts") or m.group("ts2")
            tags = m.group("tags") or m.group("tags2")
            if tags:
                for t in tags.split():
                    tm = _TAG.fullmatch(t)
                    if tm:
                        ranks[tm.group(1)] = int(tm.group(2))
            s = s[m.end():]
        else:
            m = _WRAPPER.match(s)
            if m and m.end() < len(s):
                s = s[m.end():]
        if s is before:
            break
    for lf in _LEVEL_FORMS:
        m = lf.match(s)
        if m:
            s = s[m.end():]
            break
    return s, ts, ranks


def wrapped(text: str) -> bool:
    """Does one of the wrappers start `text`?"""
    return _WRAPPER.match(text) is not None


def split_segments(text: str) -> list[str]:
    """A physical line may hold tqdm fragments joined by `\\r`; each segment is its own message."""
    if "\r" not in text:
        return [text]
    return [p for p in text.split("\r") if p.strip()]


def lines_of(raw: bytes, no: int, offset: int) -> list[Line]:
    text = strip_noise(decode(raw))
    out = []
    for seg in split_segments(text):
        msg, ts, ranks = parse_message(seg)
        out.append(Line(no, offset, text, msg, ts, ranks))
    return out

"""Evidence rules: each message is checked against the known sglang lines (warnings.toml,
log_lines.toml) and the feature's marker, giving typed observations. Like invoke's stream
watchers, the classifier is fed one message at a time and never looks back."""
from __future__ import annotations

import re
from typing import Optional

from dynspec_cli.engines.sglang.knowledge import Knowledge, tables_dir
from dynspec_cli.evidence import probe_lines
from dynspec_cli.evidence.commands import CommandReader
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import LAUNCH_PREFIX, PROBE_PREFIX, Observation, exception_of
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.tables import WarningRow, regex

# vLLM's line format, which older sglang builds (logging through vllm's logger) and custom logging
# configs write too: "ERROR 04-11 15:03:19 [tp_worker_overlap_thread.py:112] msg". (Not in
# evidence/lines.py: the vLLM classifier reads the file name from it.)
_VLLM_SHAPE = re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\] ?")


class Classifier:
    # Lines checked for a literal by plain substring search before the one alternation of all the
    # literals is compiled: compiling it costs about what this many lines cost the slower search,
    # and most logs `verify` reads before a benchmark are shorter.
    SCAN_BEFORE_COMPILE = 2000

    def __init__(self, knowledge: Knowledge, feature: Feature) -> None:
        self.k = knowledge
        self.feature = feature
        # a pattern is compiled the first time its literal is in a line (tables.regex): a run meets few
        self._landmarks = [row for row in knowledge.log_lines if row.id not in ("decode-batch", "traceback", "exception-line")]
        self._decode_row = next(r for r in knowledge.log_lines if r.id == "decode-batch")
        self._warning_literals = [(w, _literal_of(w)) for w in knowledge.warnings]
        literals = [feature.marker.literal, "Traceback (most recent call last)", PROBE_PREFIX, LAUNCH_PREFIX]
        literals += [lit for _, lit in self._warning_literals]
        literals += [row.literal for row in self._landmarks]
        literals += [d.literal for d in feature.dead_when]
        self.literals = sorted({x for x in literals if x})
        self._any_literal: Optional[re.Pattern] = None  # one C-level scan per line, once compiled
        self._scans_left = self.SCAN_BEFORE_COMPILE
        self.commands = CommandReader(tables_dir())

    def _has_literal(self, msg: str) -> bool:
        if self._any_literal is None:
            self._scans_left -= 1
            if self._scans_left > 0:
                return any(x in msg for x in self.literals)
            self._any_literal = re.compile("|".join(re.escape(x) for x in self.literals))
        return self._any_literal.search(msg) is not None

    def classify(self, line: Line) -> list[Observation]:
        if line.msg[:1] in "DIWEC" and (m := _VLLM_SHAPE.match(line.msg)):
            line.msg = line.msg[m.end():]
        msg = line.msg
        cmd = None if msg.startswith(LAUNCH_PREFIX) or PROBE_PREFIX in msg else self.commands.feed(msg)
        if cmd is not None:  # a launch command in the log: the flags the user requested
            return [Observation(cmd[0], line, cmd[0], {"flags": cmd[1]})]
        if msg.startswith("Decode batch"):
            m = regex(self._decode_row.pattern).search(msg)
            data = {k: v for k, v in (m.groupdict().items() if m else ()) if v is not None}
            return [Observation("landmark", line, "decode-batch", data, landmark=self._decode_row)]
        if not self._has_literal(msg):
            return exception_of(line)
        out: list[Observation] = []
        body = probe_lines.payload(msg)
        if body is not None:
            return [Observation("probe", line, "probe", {"event": probe_lines.parse_event(body)})]
        if msg.startswith(LAUNCH_PREFIX):
            return [Observation("launch", line, "launch", {"json": msg[len(LAUNCH_PREFIX):]})]
        if self.feature.marker.literal in msg:
            m = self.feature.marker_re.search(msg)
            if m:
                out.append(Observation("marker", line, "marker", {k: v for k, v in m.groupdict().items()}))
        out += self._feature_dead(line, msg)
        for row, lit in self._warning_literals:
            if lit and lit in msg:
                m = regex(row.pattern).search(msg) if row.pattern is not None else None
                if row.pattern is None or m:
                    out.append(Observation("warning", line, row.id, m.groupdict() if m else {}, warning=row))
        for row in self._landmarks:
            if row.literal in msg:
                m = regex(row.pattern).search(msg)
                if m:
                    out.append(Observation("landmark", line, row.id, m.groupdict(), landmark=row))
        if "Traceback (most recent call last)" in msg:
            out.append(Observation("traceback", line, "traceback"))
        return out or exception_of(line)


    def _feature_dead(self, line: Line, msg: str) -> list[Observation]:
        """A line of the feature's `dead_when`: sglang switched the feature off itself."""
        for d, rx in zip(self.feature.dead_when, self.feature.dead_res):
            if d.literal in msg and (m := rx.search(msg)):
                return [Observation("feature-dead", line, "feature-dead", m.groupdict())]
        return []


def _literal_of(w: WarningRow) -> str:
    if w.text is not None:
        return w.text.rstrip()
    # the longest run of plain characters in the pattern is a safe prefilter
    runs = re.findall(r"[A-Za-z0-9 ,/=:-]{6,}", w.pattern)
    return max(runs, key=len) if runs else ""

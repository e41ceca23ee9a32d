"""Evidence rules for vLLM logs: vLLM's own line format, its known lines (configs/vllm/log_lines.toml)
and the feature's marker, giving the same typed observations as the sglang classifier.

vLLM writes `LEVEL mm-dd hh:mm:ss [file.py:N] message` (vllm/logger.py's default format), in
multiprocess servers prefixed by the process: `(APIServer pid=1)`, `(EngineCore_DP0 pid=2)`,
`(VllmWorker rank=0 pid=3)`, `(Worker_TP1 pid=4)`. Wrappers (docker compose, Kubernetes) are
removed by evidence/lines.py first."""
from __future__ import annotations

import ast
import re
from typing import Any, Optional

from dynspec_cli.engines.vllm import detect
from dynspec_cli.evidence.commands import CommandReader
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import LAUNCH_PREFIX, PROBE_PREFIX, Observation, exception_of
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.engines.vllm.knowledge import VllmKnowledge, tables_dir

_PROC = re.compile(detect.PROC)
_VLLM_PREFIX = re.compile(detect.PREFIX)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<lineno>\d+), in (?P<function>[\w<>]+)')
_SPEC = re.compile(r"speculative_config=(?:None\b|SpeculativeConfig\((?P<body>[^()]*(?:\([^()]*\)[^()]*)*)\))")
_KV = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|[^,]*)")
_INT_FIELD = re.compile(r"\b(tensor_parallel_size|pipeline_parallel_size|data_parallel_size)=(\d+)")
_NON_DEFAULT = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
# LoggingStatLogger.log (vllm/v1/metrics/loggers.py): "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg
# generation throughput: %.1f tokens/s, Running: %d reqs, ..."; its SpecDecoding metrics line follows it at once
# (same log_fn), so that line is this engine's. V0's metrics.py line has no engine prefix.
_STATS = re.compile(r"(?:Engine (?P<engine>\d+): )?Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: "
                    r"(?P<gen>[\d.]+) tokens/s(?:, Running: (?P<running>\d+) reqs)?")
_API_VERSION = re.compile(r"vLLM API server version (?P<version>\S+)")



def normalize(line: Line) -> Line:
    """Strip vLLM's process tag and `LEVEL date [file:N]` prefix from `line.msg` (in place)."""
    s = line.msg
    m = _PROC.match(s)
    if m:
        s = s[m.end():]
        if m.group("role"):
            line.ranks[m.group("role")] = int(m.group("rank"))
        elif m.group("wrank"):
            line.ranks["TP"] = int(m.group("wrank"))
        line.ranks.setdefault("pid", int(m.group("pid")))
    m = _VLLM_PREFIX.match(s)
    line.src = None
    if m:
        line.ts = m.group("ts")
        line.src = m.group("src")  # the file that logged the line: vllm's logger names it
        s = s[m.end():]
    line.msg = s
    return line


def parse_engine_config(msg: str) -> dict[str, Any]:
    """Fields of 'Initializing a V1 LLM engine (v...) with config: ...' that dynspec uses."""
    out: dict[str, Any] = {}
    m = _SPEC.search(msg)
    if m:
        if m.group(0) == "speculative_config=None":
            out["speculative"] = None
        else:
            fields = {k: v.strip("'") for k, v in _KV.findall(m.group("body"))}
            out["speculative"] = {"method": fields.get("method"), "model": fields.get("model"),
                                  "num_spec_tokens": _int(fields.get("num_spec_tokens"))}
    for k, v in _INT_FIELD.findall(msg):
        out.setdefault(k, int(v))
    return out


def parse_non_default_args(msg: str) -> Optional[dict]:
    m = _NON_DEFAULT.search(msg)
    if not m:
        return None
    try:
        d = ast.literal_eval(m.group("args"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def _int(v: Optional[str]) -> Optional[int]:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


class VllmClassifier:
    def __init__(self, knowledge: VllmKnowledge, feature: Feature) -> None:
        self.k = knowledge
        self.feature = feature
        self._rows = knowledge.matchers
        literals = [feature.marker.literal, "Traceback (most recent call last)", PROBE_PREFIX, LAUNCH_PREFIX,
                    'File "', "non-default args:", "Avg generation throughput", "vLLM API server version"]
        literals += [r.literal for r, _ in self._rows]
        self.literals = sorted({x for x in literals if x})
        self.commands = CommandReader(tables_dir())

    def classify(self, line: Line) -> list[Observation]:
        normalize(line)
        msg = line.msg
        cmd = None if msg.startswith(LAUNCH_PREFIX) or PROBE_PREFIX in msg else self.commands.feed(msg)
        if cmd is not None:  # a launch command in the log: the flags the user requested
            return [Observation(cmd[0], line, cmd[0], {"flags": cmd[1]})]
        src = line.src or ""
        runner_src = self.k.runner_of_module(src) if src else None
        if not any(lit in msg for lit in self.literals):
            if runner_src:
                return [Observation("landmark", line, "runner-source", {"runner": runner_src, "src": src})]
            return exception_of(line)
        at = msg.find(PROBE_PREFIX)
        if at >= 0:
            return [Observation("probe", line, "probe", {"json": msg[at + len(PROBE_PREFIX):]})]
        if msg.startswith(LAUNCH_PREFIX):
            return [Observation("launch", line, "launch", {"json": msg[len(LAUNCH_PREFIX):]})]
        out: list[Observation] = []
        if self.feature.marker.literal in msg:
            m = self.feature.marker_re.search(msg)
            if m:
                out.append(Observation("marker", line, "marker", dict(m.groupdict())))
        m = _FRAME.match(msg)
        if m:
            return out + [Observation("frame", line, "traceback-frame", m.groupdict())]
        for row, rx in self._rows:
            if row.literal in msg:
                m = rx.search(msg)
                if m:
                    data = {k: v for k, v in m.groupdict().items() if v is not None}
                    if "config" in data:  # an engine config line (its fields: parse_engine_config)
                        data.update(parse_engine_config(msg))
                    out.append(Observation("landmark", line, row.id, data))
        if "non-default args:" in msg:
            args = parse_non_default_args(msg)
            if args is not None:
                out.append(Observation("landmark", line, "non-default-args", {"args": args}))
        m = _API_VERSION.search(msg)
        if m:
            out.append(Observation("landmark", line, "api-version", {"version": m.group("version")}))
        m = _STATS.search(msg)
        if m:
            out.append(Observation("landmark", line, "engine-stats", {"gen": float(m.group("gen")), "engine": _int(m.group("engine")),
                                                                      "running": _int(m.group("running"))}))
        if "Traceback (most recent call last)" in msg:
            out.append(Observation("traceback", line, "traceback"))
        if runner_src:
            out.append(Observation("landmark", line, "runner-source", {"runner": runner_src, "src": src}))
        return out or exception_of(line)

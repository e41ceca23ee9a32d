"""A toy engine: the seam's test (tests/seam/test_toy_engine.py copies this folder to
dynspec_cli/engines/toy/ and adds one line to the registry). It keeps the contract of
engines/protocol.py with the neutral parts dynspec offers every engine (the protocol's Base defaults,
the judge core of verdict/core.py, the Observation of evidence/observation.py) and its own tables
(tables/ beside this file): its log lines, its one release, how its log is recognised.

The toy server (server.py) writes `toy DATE TIME LEVEL message` lines: its release when it starts,
whether it speculates and how, the patch's marker, `ready`. A launch is live when the marker came
and speculation is on; dead when speculation is off (DS102) or the server is ready without the
marker (DS301)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from dynspec_cli.engines.protocol import Base, Serving
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import LAUNCH_PREFIX, Observation, exception_of
from dynspec_cli.knowledge.findings import Finding
from dynspec_cli.knowledge.tables import regex
from dynspec_cli.verdict import core
from dynspec_cli.verdict.codes import EXIT
from dynspec_cli.verdict.result import Verdict, claim, no_claims

TABLES = Path(__file__).resolve().parent / "tables"


class Knowledge:
    def __init__(self) -> None:
        from dynspec_cli.resources import tomllib

        def load(name: str) -> dict:
            return tomllib.loads((TABLES / name).read_text(encoding="utf-8"))

        self.releases: list[str] = load("releases.toml")["releases"]
        self.lines: list[dict] = load("log_lines.toml")["line"]


class Classifier:
    """A line of a row of tables/log_lines.toml is a landmark; the feature's marker, a marker."""

    def __init__(self, k: Knowledge, feature) -> None:
        self.k, self.feature = k, feature

    def classify(self, line: Line) -> list[Observation]:
        msg = line.msg
        if msg.startswith(LAUNCH_PREFIX):
            return [Observation("launch", line, "launch", {})]
        if self.feature.marker.literal in msg and (m := self.feature.marker_re.search(msg)):
            return [Observation("marker", line, "marker", m.groupdict())]
        for row in self.k.lines:
            if row["literal"] in msg and (m := regex(row["pattern"]).search(msg)):
                return [Observation("landmark", line, row["id"], m.groupdict())]
        return exception_of(line)


@dataclass
class Launch:
    index: int
    first: Line
    last_line: Optional[Line] = None
    version: Optional[str] = None
    method: Optional[str] = None
    method_line: Optional[Line] = None
    spec_off: Optional[Line] = None
    markers: list = field(default_factory=list)
    ready: Optional[Line] = None
    crash: Optional[Line] = None

    def steady(self, decode_lines: int) -> bool:
        return self.ready is not None


class Judging(core.Judging):
    version: Optional[str] = None


class Judge(core.Core):
    name = "toy"
    server_noun = "a toy server"
    server_line = "any toy server line"
    judging = Judging

    def __init__(self, k: Knowledge, feature, version: Optional[str] = None) -> None:
        self.k, self.feature, self.pinned = k, feature, version
        self._launches: list[Launch] = []

    @property
    def launches(self) -> list[Launch]:
        return self._launches

    def feed(self, obs: Observation) -> None:
        if not self._launches or (obs.id == "starting" and self._launches[-1].version is not None):
            self._launches.append(Launch(len(self._launches) + 1, obs.line))
        la = self._launches[-1]
        la.last_line = obs.line
        if obs.kind == "marker":
            la.markers.append(obs)
        elif obs.id == "starting":
            la.version = obs.data.get("version")
        elif obs.id == "speculation-on":
            la.method, la.method_line = obs.data.get("method"), obs.line
        elif obs.id == "speculation-off":
            la.spec_off = obs.line
        elif obs.id == "ready":
            la.ready = obs.line
        elif obs.id == "crash" or obs.kind == "exception":
            la.crash = obs.line

    def steps(self):
        return [self.step_release, self.step_speculation, self.step_marker, self.step_ready, self.step_crash]

    def step_release(self, j: Judging) -> None:
        j.version = self.pinned or j.la.version
        if j.version and j.version not in self.k.releases:
            j.add("DS307", f"toy {j.version} is not in the toy engine's tables ({', '.join(self.k.releases)}).")

    def step_speculation(self, j: Judging) -> None:
        if j.la.spec_off is not None:
            j.add("DS102", "the toy server says speculative decoding is off: no draft runs.", line=j.la.spec_off)

    def step_marker(self, j: Judging) -> None:
        la = j.la
        if la.markers:
            m0 = la.markers[0]
            j.marker.update(found=True, line=m0.line.no or None, text=m0.line.text, fields=m0.data, ranks=[])
            j.add("DS302", f"marker logged by this launch ({len(la.markers)} time(s)).", line=m0.line, clip=False)

    def step_ready(self, j: Judging) -> None:
        la = j.la
        if la.ready and not la.markers and la.spec_off is None:
            j.add("DS301", "the server is ready and the marker was never logged.", line=la.ready, clip=False)

    def step_crash(self, j: Judging) -> None:
        la = j.la
        if la.crash is not None and (j.at_eof or j.quiet_for >= 1.0):
            j.crashed = True
            j.crash = {"exception": "ToyServerError", "message": la.crash.msg, "line": la.crash.no or None,
                       "text": la.crash.text}
            j.add("DS303", f"the toy server failed: {la.crash.msg.strip()}", line=la.crash)

    def is_live(self, j: Judging) -> bool:
        return bool(j.la.markers)

    def missing_evidence(self, j: Judging) -> list[str]:
        return ([] if j.version else ["the toy release (its `toyserve V starting` line)"]) + \
               [f"the marker ({self.feature.marker.literal!r}) or a ready server"]

    def assemble(self, j: Judging) -> Verdict:
        la = j.la
        if la.method:
            j.worker.update({"class": f"toy {la.method} drafter", "basis": f"line {la.method_line.no}"})
        return self.make(verdict=j.verdict, engine_version=j.version, speculative_algorithm=la.method,
                         overlap_schedule=None, worker=j.worker, server_ready=la.ready is not None,
                         crashed=j.crashed, crash=j.crash, marker=j.marker, findings=j.findings,
                         launch={"index": la.index, "of": len(self._launches), "first_line": la.first.no or None},
                         missing=j.missing, claims=self.claims(j))

    def claims(self, j: Judging) -> dict[str, Any]:
        """Each claim with the line that proves it (verdict/result.py), or null."""
        la, out = j.la, no_claims()
        if la.crash is not None and j.crashed:
            out["crashed"] = claim(True, la.crash, "the toy server's ERROR line")
        elif la.ready is not None:
            out["crashed"] = claim(False, la.ready, "the server became ready and no ERROR line follows")
        if la.ready is not None:
            out["server_ready"] = claim(True, la.ready, "the ready line")
        if la.method:
            out["speculative_algorithm"] = claim(la.method, la.method_line, "the toy server's speculative decoding line")
            out["speculative"] = claim(True, la.method_line, "the toy server's speculative decoding line")
        elif la.spec_off is not None:
            out["speculative"] = claim(False, la.spec_off, "speculative decoding: off")
        if j.worker.get("class"):
            out["worker"] = claim(j.worker["class"], la.method_line, j.worker["basis"])
        return out


# What a profile of the toy engine starts (its stand-in server, server.py beside this file) and when it is ready.
SERVING = Serving("dynspec_cli.engines.toy.server", model_flag="--model", readiness=("/health",))

# The toy preflight, run with the server's python: where the toy server's module is, and whether its
# source holds the feature's marker literal (stdlib only; argv: module, literal).
FIND = """import importlib.util, json, sys
spec = importlib.util.find_spec(sys.argv[1])
path = spec.origin if spec is not None else None
text = open(path, encoding="utf-8").read() if path else ""
line = next((i for i, t in enumerate(text.splitlines(), 1) if sys.argv[2] in t), None)
print(json.dumps({"file": path, "line": line}))
"""


class Toy(Base):
    name = "toy"
    title = "toy"
    package = "toy"
    serving = SERVING

    @property
    def tables(self) -> Path:
        return TABLES

    def knowledge(self) -> Knowledge:
        return Knowledge()

    def classifier(self, feature) -> Classifier:
        return Classifier(self.knowledge(), feature)

    def judge(self, feature, patched=None, version=None, diff=None) -> Judge:
        return Judge(self.knowledge(), feature, version)

    def preflight(self, host, python, feature, flags, env, patched=None, *, patch_diff=None, dynamic=False) -> dict:
        import json

        res = host.run_python(python, FIND, [self.serving.module, feature.marker.literal], env=env or None, timeout=30)
        found = json.loads(res.stdout or b"{}")
        patched_at = [{"file": found["file"], "line": found["line"]}] if found.get("line") else []
        findings = [] if patched_at else [Finding("DS304", f"no {feature.marker.literal!r} in the toy server's source.")]
        verdict = "reachable" if patched_at else "unknown"
        return {"engine": self.name, "verdict": verdict, "exit_code": EXIT[verdict], "patched": patched_at,
                "findings": [f.to_json() for f in findings]}

    def preflight_text(self, result: dict[str, Any]) -> Optional[str]:
        where = ", ".join(f"{p['file']}:{p['line']}" for p in result["patched"]) or "not found"
        return f"toy preflight: {result['verdict'].upper()} (exit {result['exit_code']}); the patch: {where}"


ENGINE = Toy()

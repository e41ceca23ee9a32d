"""sglang's adaptive speculation under guard (`--speculative-adaptive`): the draft steps each rank ran,
window by window, and whether its controller still adapted.

sglang keeps one controller per batch-size tier (AdaptiveStepSlot). Every few verify batches it
re-chooses the draft steps from an EMA of the drafts accepted per request. From s steps it steps up
when the EMA exceeds s - 0.5, and from 0 steps it probes the next candidate at every update
(configs/features/speculative-adaptive.toml, [controller]). Each choice is logged ("Adaptive spec
params updated", "Switch adaptive runtime state").

A rank is **pinned** in a window when all of these hold:
- it ran the whole window at one tier's s steps, below that tier's highest choice;
- its log shows no controller line in the window;
- its Decode batch lines show the drafts were accepted well enough to step up (more than
  s - 0.5 + 0.1 accepted drafts per request; at 0 steps, any busy window).
The controller no longer adapts: its verify results no longer reach it, or its state is stuck. The
benchmark then measures static speculation at s steps, not the adaptive server that was proven.

A window whose batches all run in a tier whose only choice is 0 steps (batch 64 and up by default,
0.5.14+) runs no draft by design: plain, never collapsed."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import msgspec

from dynspec_cli.evidence.argv import flag_values
from dynspec_cli.knowledge.features import Controller, Feature, load_feature

LINES = ("adaptive-init", "adaptive-update", "adaptive-switch")
lines = LINES  # (engines/protocol.py Adaptive: this module is sglang's `adaptive`)
MARGIN = 0.1  # accepted drafts per request above the rise point: the EMA lags, a Decode line averages its interval


@dataclass
class Config:
    """The server's tiers (lower batch bound -> candidate steps) and how their controllers move."""

    tiers: dict[int, list[int]]
    up_hysteresis: dict[int, float]
    rule: Controller
    source: str  # "sglang 0.5.23's default tiers" | "--speculative-adaptive-config FILE"
    capture: Optional[list[int]] = None  # the CUDA-graph batch sizes batches are padded to (None: not known)
    log_interval: int = 40  # verify batches per Decode batch line (--decode-log-interval)

    def route(self, batch: int) -> int:
        bounds = sorted(self.tiers)
        return ([b for b in bounds if b <= batch] or bounds[:1])[-1]

    def tier(self, running: int) -> Optional[int]:
        """The tier a batch runs in (sglang routes it after padding it to a CUDA-graph batch size);
        None where the padding is not known and may move it to the next tier."""
        padded = next((c for c in self.capture if c >= running), running) if self.capture is not None else None
        if padded is not None:
            return self.route(padded)
        return self.route(running) if self.route(running) == self.route(running + 8) else None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "tiers": {str(b): c for b, c in sorted(self.tiers.items())}}


@dataclass
class RankSteps:
    """What one rank's log said about its controller: the steps it runs, and its lines in this window."""

    steps: Optional[int] = None
    moves: int = 0  # controller lines (updated, switched) in the window


class Tracker:
    """Each rank's adaptive steps, from the log before the benchmark on, fed one controller line at a time."""

    def __init__(self, config: Optional[Config] = None) -> None:
        self.config = config
        self.ranks: dict[str, RankSteps] = {}
        self.first_tier: Optional[list[int]] = None  # the candidates the init line showed (the first tier's)

    def feed(self, label: str, line_id: str, data: dict[str, Any], counted: bool = True) -> None:
        r = self.ranks.setdefault(label, RankSteps())
        if line_id == "adaptive-init":
            r.steps = _int(data.get("steps"))
            self.first_tier = [int(x) for x in (data.get("candidates") or "").split(",") if x.strip().isdigit()] or None
            return
        new = _int(data.get("new"))
        if line_id == "adaptive-switch" and new is not None:
            r.steps = new
        if counted:
            r.moves += 1

    def cut(self) -> dict[str, RankSteps]:
        """This window's view per rank (steps now, controller lines seen); the counts start again."""
        out = {k: RankSteps(v.steps, v.moves) for k, v in self.ranks.items()}
        for v in self.ranks.values():
            v.moves = 0
        return out


def config_of(feature: Feature, knowledge, version: Optional[str], argv: list[str], host,
              first_tier: Optional[list[int]] = None) -> tuple[Optional[Config], Optional[str]]:
    """The server's adaptive configuration: its --speculative-adaptive-config file read on its host,
    else the release's default tiers (of the releases `version` spans, those whose first tier is the
    `first_tier` its log showed). (None, why) where it cannot be known."""
    rule = feature.controller
    path = _value(argv, "--speculative-adaptive-config")
    if path:
        try:
            doc = json.loads(host.read_file(path).decode("utf-8"))
        except Exception as e:  # noqa: BLE001 - unreadable config: named, not judged
            return None, f"adaptive: cannot read --speculative-adaptive-config {path} ({e}): its tiers are not judged"
        tiers = {int(k): sorted(set(v.get("candidate_steps") or [])) for k, v in doc.items() if k.isdigit() and isinstance(v, dict)}
        if not tiers or not all(tiers.values()):
            return None, f"adaptive: --speculative-adaptive-config {path} has no tier with candidate_steps: not judged"
        up = {int(k): float(v.get("up_hysteresis", doc.get("up_hysteresis", rule.up_hysteresis)))
              for k, v in doc.items() if k.isdigit() and isinstance(v, dict)}
        warm, every = doc.get("warmup_batches", rule.warmup_batches), doc.get("update_interval", rule.update_interval)
        r = msgspec.structs.replace(rule, warmup_batches=int(warm), update_interval=int(every))
        return Config(tiers, up, r, f"--speculative-adaptive-config {path}", capture_of(rule, argv), interval_of(r, argv)), None
    tiers = default_tiers(knowledge, feature, version, first_tier)
    if not tiers:
        return None, f"adaptive: no default tiers known for sglang {version or '(version unknown)'}: its tiers are not judged"
    return Config(tiers, {b: rule.up_hysteresis for b in tiers}, rule, f"sglang {version}'s default tiers",
                  capture_of(rule, argv), interval_of(rule, argv)), None


def default_tiers(k, feature: Feature, version: Optional[str],
                  first_tier: Optional[list[int]] = None) -> Optional[dict[int, list[int]]]:
    """The default tiers of the release, or of every release of a span ("0.5.19 – 0.5.23") when they
    agree; `first_tier` (the init line's candidates) rules out the releases whose first tier differs."""
    from dynspec_cli.engines.sglang.tiers import tiers_of

    releases: list[str] = []
    for part in (version or "").split(","):
        a, _, b = (x.strip() for x in part.partition("–"))
        if a in k.releases:
            i = k.releases.index(a)
            j = k.releases.index(b) if b in k.releases else i
            releases += k.releases[i:j + 1]
    found = [t for t in (tiers_of(k, feature, v) for v in releases) if t]
    if first_tier:
        found = [t for t in found if t[min(t)] == first_tier]
    return found[0] if found and all(f == found[0] for f in found) else None


def interval_of(rule: Controller, argv: list[str]) -> int:
    return max(1, _int(_value(argv, "--decode-log-interval")) or rule.decode_log_interval)


def capture_of(rule: Controller, argv: list[str]) -> Optional[list[int]]:
    """The batch sizes sglang pads to: its default with speculation, capped by --cuda-graph-max-bs;
    none without CUDA graphs or padding; not known for a list of the user's own."""
    if "--disable-cuda-graph" in argv or "--disable-cuda-graph-padding" in argv:
        return []
    if "--cuda-graph-bs" in argv:  # nargs="+": the sizes up to the next flag
        i = argv.index("--cuda-graph-bs") + 1
        own = []
        while i < len(argv) and not argv[i].startswith("-"):
            own.append(_int(argv[i]))
            i += 1
        return sorted(own) if own and None not in own else None
    top = _int(_value(argv, "--cuda-graph-max-bs"))
    sizes = rule.capture_sizes()
    return [s for s in sizes if top is None or s <= top] + ([top] if top and top not in sizes else [])


def setup(target, receipt: dict[str, Any], classifier, end: int) -> tuple[Optional[Tracker], list[str]]:
    """A Tracker when the proven server runs adaptive speculation (its flags ask for it and its log
    does not say sglang turned it off), primed with the controller lines logged before the benchmark."""
    argv = list((receipt.get("profile") or {}).get("argv") or [])
    if "--speculative-adaptive" not in argv or not target.log:
        return None, []
    feature = load_feature("speculative-adaptive")
    from dynspec_cli.engines.sglang.knowledge import knowledge

    tracker = Tracker()
    notes: list[str] = []
    start = int((receipt.get("run") or {}).get("log_offset") or 0)  # this launch's part of the log, up to `end`
    script = ("tail -c +$(($2 + 1)) \"$1\" | head -c $(($3 - $2)) | "
              "grep -a -E 'AdaptiveSpeculativeParams initialized|Switch adaptive runtime state|speculative_adaptive disabled: ' "
              "| tail -n 2000")
    try:
        res = target.host.run(["sh", "-c", script, "sh", target.log, str(start), str(max(start, end))], timeout=120,
                              idempotent=True)
        text = res.text
    except Exception as e:  # noqa: BLE001 - the steps before the benchmark stay unknown: named
        notes.append(f"adaptive: the controller's lines before the benchmark could not be read ({e})")
        text = ""
    if "speculative_adaptive disabled: " in text:
        return None, ["adaptive: sglang turned --speculative-adaptive off at start-up (speculative_adaptive disabled): "
                      "static speculation is judged"]
    prime(tracker, classifier, text)
    tracker.config, note = config_of(feature, knowledge(), receipt.get("sglang_version"), argv, target.host,
                                     tracker.first_tier)
    return tracker, notes + ([note] if note else [])


def prime(tracker: Tracker, classifier, text: str) -> None:
    """Feed log text (lines from before the benchmark) through the classifier into the tracker."""
    from dynspec_cli.evidence.scan import Feeder

    class Sink:
        def feed(self, obs) -> None:
            if obs.kind == "landmark" and obs.id in LINES:
                tracker.feed(label_of(obs), obs.id, obs.data, counted=False)

    f = Feeder(classifier, Sink(), numbered=False)
    f.feed(text.encode("utf-8"))
    f.flush()


def label_of(obs) -> str:
    return f"DP{obs.line.ranks['DP']}" if "DP" in obs.line.ranks else ""


@dataclass
class WindowJudge:
    """One window's adaptive evidence per rank, for windows.judge."""

    config: Config
    steps: dict[str, RankSteps]

    def level(self, r, level: Optional[float]) -> Optional[float]:
        """The on level a rank could reach in this window: at s draft steps a verify yields s + 1
        tokens at most, whatever the run reached at more steps; none where its steps changed."""
        seen = self.steps.get(r.label)
        if level is None or seen is None or seen.steps is None or seen.moves:
            return None
        return min(level, seen.steps + 1.0) if seen.steps > 0 else None

    def judge(self, r) -> None:
        judge(r, self.steps.get(r.label), self.config)


def window(config: Config, steps: dict[str, RankSteps]) -> WindowJudge:
    """The judge of one guard window (guard/windows.py `controller`)."""
    return WindowJudge(config, steps)


def judge(r, seen: Optional[RankSteps], cfg: Config) -> None:
    """Turn an effective, collapsed or plain rank window `r` (windows.RankWindow) pinned when its
    controller did not adapt; collapsed into plain where its tier never drafts."""
    lines = [d for d in r.decode if d.accept_len is not None]
    tiers = {cfg.tier(d.running) for d in lines}
    if not lines or None in tiers or len(tiers) != 1 or r.state not in ("effective", "collapsed", "plain"):
        return
    bound = tiers.pop()
    cands = cfg.tiers[bound]
    above = [b for b in cfg.tiers if b > bound]
    r.adaptive = {"tier": bound, "tier_last": min(above) - 1 if above else None, "candidates": cands,
                  "steps": seen.steps if seen else None, "controller_lines": seen.moves if seen else 0}
    if cands == [0]:
        if r.state == "collapsed":
            r.state = "plain"  # this tier never drafts: speculation off is what sglang chose
        return
    steps = seen.steps if seen else None
    if steps is None and r.num_steps is not None:
        steps = int(r.num_steps)  # sglang:spec_num_steps (0.5.23), when the log said nothing
        r.adaptive["steps"] = steps
    if seen is not None and seen.moves or steps is None or steps not in cands or steps >= max(cands):
        return
    if len(lines) * cfg.log_interval < cfg.rule.warmup_batches + 2 * cfg.rule.update_interval:
        return  # too few verify batches for the controller to have had its turn
    accepted = sum(d.accept_len - 1 for d in lines) / len(lines)
    rise = steps - cfg.rule.rise_offset + cfg.up_hysteresis.get(bound, cfg.rule.up_hysteresis)
    if steps == 0 or accepted > rise + MARGIN:
        r.state = "pinned"
        r.adaptive.update(accepted=round(accepted, 3), rise_above=round(rise, 3))
        r.held = pinned_message(r)


def pinned_message(r) -> str:
    a = getattr(r, "adaptive", None) or {}
    steps, cands, bound = a.get("steps"), a.get("candidates") or [], a.get("tier")
    upper = a.get("tier_last")
    batches = f"batches {bound}–{upper}" if upper else f"batches {bound} and up"
    tier = f"tier {bound} ({batches}; draft steps {', '.join(map(str, cands))})"
    if steps == 0:
        return (f"the adaptive controller held 0 draft steps (drafting off) in {tier} with no controller line, though "
                f"sglang probes the next step from 0 at every update: the adaptive tier pinned, the run measured no speculation")
    return (f"the adaptive controller held {steps} draft step{'s' if steps != 1 else ''} in {tier} with no controller "
            f"line while {a.get('accepted', 0):.2f} drafts per request were accepted (it steps up above "
            f"{a.get('rise_above', 0):.2f}): the adaptive tier pinned, the run measured static speculation, not adaptive")


def _value(argv: list[str], flag: str) -> Optional[str]:
    v = flag_values(argv).get(flag)
    return v if isinstance(v, str) else None


def _int(v) -> Optional[int]:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None


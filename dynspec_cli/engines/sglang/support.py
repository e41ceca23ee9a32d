"""A feature's own support rules (configs/features/*.toml `[[support]]`), replayed on the flags
before launch: the first rule of the release that fails is the reason sglang will log when it
switches the feature off (`dead_when`)."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.knowledge.features import Feature, SupportRule
from dynspec_cli.knowledge.findings import Finding
from dynspec_cli.engines.sglang.knowledge import Knowledge


def unsupported(rule: SupportRule, fv: dict[str, Any], algorithm: Optional[str], overlap: Optional[bool]) -> Optional[bool]:
    """True: the rule fails on these flags; False: it passes; None: the flags cannot tell."""
    if not rule.predictable:
        return None
    if rule.resolved == "overlap":
        return overlap
    value = algorithm if rule.flag == "--speculative-algorithm" else fv.get(rule.flag)
    if value is None:
        return {"supported": False, "unsupported": True, "unknown": None}[rule.absent]
    if rule.allowed is not None:
        return str(value).upper() not in {a.upper() for a in rule.allowed}
    if rule.above is not None:
        try:
            return int(value) > rule.above
        except (TypeError, ValueError):
            return None
    return value is True or str(value).lower() in ("1", "true")


def rules_for(k: Knowledge, feature: Feature, version: str) -> list[SupportRule]:
    m = k.mask_of(version)
    return [r for r in feature.support if k.mask(r.versions) & m]


def predict(k: Knowledge, feature: Feature, version: str, fv: dict[str, Any], algorithm: Optional[str],
            overlap: Optional[bool]) -> list[Finding]:
    """DS112 when the release's rules switch the requested feature off; nothing when it is not
    requested, has no rules, or no rule fails. A rule the flags cannot decide (the platform, an
    unset topk) does not save a later rule that fails: the feature is off either way, only the
    logged reason may be the earlier one."""
    if not feature.support or feature.flag is None or not fv.get(feature.flag.name):
        return []
    if feature.versions and not k.mask(feature.versions) & k.mask_of(version):
        return []  # the flag itself is missing: DS101 says so
    undecided: list[str] = []
    for rule in rules_for(k, feature, version):
        verdict = unsupported(rule, fv, algorithm, overlap)
        if verdict is None:
            undecided.append(rule.check)
        elif verdict:
            value = algorithm if rule.flag == "--speculative-algorithm" else fv.get(rule.flag)
            reason = rule.reason.replace("{}", str(value), 1) if value is not None else rule.reason
            earlier = f"; sglang checks {', '.join(undecided)} first, which may be the reason it logs" if undecided else ""
            return [Finding("DS112", f"sglang {version} will switch {feature.name} off: {reason} "
                                     f"(check {rule.check}{earlier}).")]
    return []

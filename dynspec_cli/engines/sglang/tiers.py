"""The draft steps a feature's default configuration lets each batch-size tier choose (the
`[[tiers]]` of configs/features/speculative-adaptive.toml), as a table per release: which batch
sizes can speculate at all. A tier whose only choice is 0 runs no draft steps and logs nothing."""
from __future__ import annotations

from typing import Optional

from dynspec_cli.knowledge.features import Feature
from dynspec_cli.engines.sglang.knowledge import Knowledge


def tiers_of(k: Knowledge, feature: Feature, version: str) -> Optional[dict[int, list[int]]]:
    """Batch-size tier -> candidate draft steps on `version`; None when the feature has no tiers there."""
    row = next((t for t in feature.tiers if k.mask(t.versions) & k.mask_of(version)), None)
    return {int(bs): steps for bs, steps in sorted(row.steps.items(), key=lambda x: int(x[0]))} if row else None


def render(k: Knowledge, feature: Feature, version: str) -> str:
    tiers = tiers_of(k, feature, version)
    if tiers is None:
        return f"{feature.name}: no default tiers for sglang {version}"
    bounds = list(tiers)
    rows = [f"{feature.name} default tiers on sglang {version} (a batch goes to the closest tier "
            "after padding to a CUDA-graph batch size):",
            f"  {'tier (batch size)':>18}  {'draft steps it may choose':<26} speculates"]
    for bs in bounds:
        steps = tiers[bs]
        spec = "never" if steps == [0] else "sometimes" if 0 in steps else "always"
        rows.append(f"  {bs:>18}  {', '.join(map(str, steps)):<26} {spec}")
    return "\n".join(rows)

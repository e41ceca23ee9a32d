"""Acceptance provenance: is the acceptance a server reports earned by its draft (real), drawn at a
configured rate (synthetic) or relaxed (lossy)? Read from the launch command with the rules of
configs/acceptance.toml."""
from __future__ import annotations

import functools
import json
from typing import Any, Optional

import msgspec

from dynspec_cli.evidence.argv import flag_values
from dynspec_cli.knowledge.tables import configs_dir, load_toml


class Rule(msgspec.Struct, forbid_unknown_fields=True):
    engine: str
    provenance: str
    why: str
    flag: Optional[str] = None
    below: Optional[float] = None
    key: Optional[str] = None
    equals: Optional[str] = None


class RulesFile(msgspec.Struct, forbid_unknown_fields=True):
    rule: list[Rule]


@functools.lru_cache(maxsize=1)
def rules() -> list[Rule]:
    return load_toml(configs_dir() / "acceptance.toml", RulesFile).rule


def of(engine: str, argv: list[str]) -> dict[str, Any]:
    """{"provenance": real | synthetic | lossy, "evidence": [{"setting", "value", "provenance", "why"}]}
    for a server command line (its flags after the program; vLLM's --speculative-config read as JSON)."""
    fv = flag_values([a for a in argv if a])
    spec = _spec(fv.get("--speculative-config"))
    evidence = []
    for r in rules():
        if r.engine != engine:
            continue
        if r.flag is not None and isinstance(fv.get(r.flag), str):
            try:
                value = float(fv[r.flag])
            except ValueError:
                continue
            if r.below is not None and value < r.below:
                evidence.append({"setting": r.flag, "value": value, "provenance": r.provenance, "why": r.why})
        elif r.key is not None and str(spec.get(r.key)) == r.equals:
            evidence.append({"setting": f"--speculative-config {r.key}", "value": spec[r.key],
                             "provenance": r.provenance, "why": r.why})
    kinds = {e["provenance"] for e in evidence}
    return {"provenance": "synthetic" if "synthetic" in kinds else "lossy" if kinds else "real", "evidence": evidence}


def describe(p: dict[str, Any]) -> str:
    return "; ".join(f"{e['setting']} {e['value']} ({e['provenance']}: {e['why']})" for e in p.get("evidence") or [])


def _spec(value) -> dict:
    if not isinstance(value, str):
        return {}
    try:
        doc = json.loads(value)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}

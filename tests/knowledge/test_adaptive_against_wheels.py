"""configs/features/speculative-adaptive.toml checked against every published sglang wheel.

Which releases have --speculative-adaptive, the support checks of adaptive_unsupported_reason (in
their order, with their messages), the fallback line and the default tiers are read from each
wheel's source with `ast`; sglang is never imported. The hand-read facts at the end are what a
person reading the named files sees, so a table that drifts from them fails too."""
from __future__ import annotations

import ast
import functools
from typing import Optional

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang.knowledge import knowledge
from dynspec_cli.engines.sglang import support
from tests.support import wheels
from tests.tools.mine_downgrades import template_regex

pytestmark = pytest.mark.wheels

K = knowledge()
F = load_feature("speculative-adaptive")
PARAMS = "sglang/srt/speculative/adaptive_spec_params.py"
NOT_CHECKS = {"cfg", "server_args", "resolved_view", "resolving_view", "None"}


@functools.lru_cache(maxsize=None)
def tree(version: str, rel: str) -> Optional[ast.Module]:
    p = wheels.unpacked(version) / rel
    return ast.parse(p.read_bytes()) if p.is_file() else None


def has_flag(version: str) -> bool:
    """The server accepts --speculative-adaptive: ServerArgs (or, 0.5.22+, an argument-group
    field file) declares a `speculative_adaptive` field, from which the flag is made (an
    explicit argparse literal up to 0.5.13.post1)."""
    root = wheels.unpacked(version) / "sglang" / "srt"
    files = [root / "server_args.py", *sorted((root / "arg_groups" / "fields").glob("*.py"))]
    return any(isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "speculative_adaptive"
               for p in files if b"speculative_adaptive" in p.read_bytes() for n in ast.walk(ast.parse(p.read_bytes())))


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return node.value
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def wheel_checks(version: str) -> list[tuple[str, str, bool]]:
    """(what the `if` tests, the reason it returns, whether an unset topk passes) of each check of
    adaptive_unsupported_reason, in order."""
    fn = next(n for n in ast.walk(tree(version, PARAMS)) if isinstance(n, ast.FunctionDef)
              and n.name == "adaptive_unsupported_reason")
    out = []
    for s in fn.body:
        if not isinstance(s, ast.If):
            continue
        attrs = [n.attr for n in ast.walk(s.test) if isinstance(n, ast.Attribute)]
        names = [n.id for n in ast.walk(s.test) if isinstance(n, ast.Name) and n.id not in NOT_CHECKS]
        check = (attrs or names)[0]
        ret = next(n for n in ast.walk(s) if isinstance(n, ast.Return))
        out.append((check, _text(ret.value), "is not None" in ast.unparse(s.test)))
    return out


def table_checks(version: str) -> list[tuple[str, str, bool]]:
    out = []
    for r in support.rules_for(K, F, version):
        row = (r.check, r.reason, r.absent == "supported")
        if not out or out[-1][:2] != row[:2]:  # several rows (flags) for one check
            out.append(row)
    return out


FLAG_RELEASES = [v for v in K.releases if K.mask(F.versions) & K.mask_of(v)]


@pytest.mark.parametrize("version", K.releases)
def test_feature_versions_are_the_releases_with_the_flag(version):
    assert has_flag(version) == (version in FLAG_RELEASES), version


@pytest.mark.parametrize("version", FLAG_RELEASES)
def test_support_rules_are_the_wheels_checks(version):
    wheel = wheel_checks(version)
    table = table_checks(version)
    assert [(c, r) for c, r, _ in table] == [(c, r) for c, r, _ in wheel]
    for (check, _, unset_ok), (_, _, wheel_unset_ok) in zip(table, wheel):
        if check == "speculative_eagle_topk":
            assert unset_ok == wheel_unset_ok, f"{version}: topk check {'is' if wheel_unset_ok else 'is not'} None-safe"


@pytest.mark.parametrize("version", FLAG_RELEASES)
def test_fallback_line_is_logged_with_the_reason(version):
    """Some literal of the release renders to a line the feature's dead_when matches, with the
    reason as its group."""
    rels = ["sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative_hook.py"]
    lits = [_text(n) for rel in rels if tree(version, rel) for n in ast.walk(tree(version, rel))
            if isinstance(n, ast.JoinedStr) and "speculative_adaptive disabled" in _text(n)]
    assert lits, version
    d = F.dead_res[0]
    m = d.search(lits[0].replace("{}", "topk=4 (x)"))
    assert m and m["reason"] == "topk=4 (x)"
    assert template_regex(lits[0].replace("{}", "{}")).fullmatch(
        "speculative_adaptive disabled: R. Falling back to static speculative params.")


@pytest.mark.parametrize("version", FLAG_RELEASES)
def test_marker_literal_is_in_the_wheel(version):
    lits = [_text(n) for n in ast.walk(tree(version, PARAMS)) if isinstance(n, (ast.JoinedStr, ast.Constant))
            and isinstance(_text(n) if not isinstance(n, ast.Constant) else n.value, str)]
    joined = [s for s in lits if F.marker.literal in s]
    assert joined, version


def default_tiers(version: str) -> dict[str, list[int]]:
    for n in tree(version, PARAMS).body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            target = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if ast.unparse(target) == "DEFAULT_ADAPTIVE_CONFIG":
                return {bs: e["candidate_steps"] for bs, e in ast.literal_eval(n.value).items()}
    # 0.5.11 - 0.5.12.post1: one slot, `cfg.get("candidate_steps", [1, 3, 7])`
    for n in ast.walk(tree(version, PARAMS)):
        if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".get") and n.args \
                and isinstance(n.args[0], ast.Constant) and n.args[0].value == "candidate_steps":
            return {"1": ast.literal_eval(n.args[1])}
    raise AssertionError(f"{version}: no default candidate_steps")


@pytest.mark.parametrize("version", FLAG_RELEASES)
def test_default_tiers(version):
    rows = [t for t in F.tiers if K.mask(t.versions) & K.mask_of(version)]
    assert len(rows) == 1 and rows[0].steps == default_tiers(version)


# --- hand-read facts (not from the feature file) --------------------------------------------
def test_hand_read_adaptive_facts():
    # 0.5.10.post1 has no adaptive_spec_params.py; 0.5.11 adds it and the flag.
    assert tree("0.5.10.post1", PARAMS) is None and has_flag("0.5.11")
    # 0.5.11 refuses the overlap scheduler (adaptive only in EAGLEWorker v1); 0.5.12 drops that check.
    assert "disable_overlap_schedule" in [c for c, _, _ in wheel_checks("0.5.11")]
    assert "disable_overlap_schedule" not in [c for c, _, _ in wheel_checks("0.5.12")]
    # 0.5.23 adds the platform check right after the algorithm check.
    assert [c for c, _, _ in wheel_checks("0.5.23")][:2] == ["speculative_algorithm", "platform_worker_cls"]
    # The default config of 0.5.14+ runs 0 draft steps from the batch-size-64 tier on.
    assert default_tiers("0.5.14")["64"] == [0] and default_tiers("0.5.13")["32"] == [1]
    assert default_tiers("0.5.20")["1"] == [1, 3, 5, 7]


# --- [controller]: how a tier's controller moves, and what a batch is padded to ----------------
def _slot_defaults(version: str) -> dict[str, object]:
    """The `cfg.get(NAME, DEFAULT)` defaults of the step slot's __init__ (AdaptiveStepSlot, 0.5.13+;
    AdaptiveSpeculativeParams before)."""
    out = {}
    for n in ast.walk(tree(version, PARAMS)):
        if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".get") and len(n.args) == 2 \
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[1], ast.Constant):
            out[n.args[0].value] = n.args[1].value
    return out


def _spec_capture_runs(version: str) -> list[tuple[int, int, int]]:
    """The `range(a, b, c)` runs of the speculative CUDA-graph batch sizes ("less padding for smaller
    batch sizes"), wherever the release builds them."""
    root = wheels.unpacked(version) / "sglang" / "srt"
    for p in [root / "server_args.py", *sorted((root / "arg_groups").glob("*.py"))]:
        text = p.read_text(encoding="utf-8") if p.is_file() else ""
        at = text.find("less padding for smaller batch sizes")
        if at < 0:
            continue
        block = text[at:at + 600]
        calls = [n for n in ast.walk(ast.parse("(" + block[block.index("list(range"):block.index(")\n", block.index("+ list(range(272")) + 1] + ")"))
                 if isinstance(n, ast.Call) and ast.unparse(n.func) == "range"]
        calls.sort(key=lambda c: (c.lineno, c.col_offset))  # source order (ast.walk goes breadth first)
        return [tuple(ast.literal_eval(a) if isinstance(a, ast.Constant) else None for a in c.args) for c in calls]
    raise AssertionError(f"{version}: no speculative CUDA-graph batch sizes")


@pytest.mark.parametrize("version", FLAG_RELEASES)
def test_controller_rule_is_the_wheels(version):
    c = F.controller
    d = _slot_defaults(version)
    assert (d["warmup_batches"], d["update_interval"], d["up_hysteresis"]) == (c.warmup_batches, c.update_interval, c.up_hysteresis)
    src = (wheels.unpacked(version) / PARAMS).read_text(encoding="utf-8")
    assert f"rise_threshold = current_step - {c.rise_offset} + self.up_hysteresis" in src
    # every default tier that sets up_hysteresis sets it to the table's value
    for n in tree(version, PARAMS).body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and "DEFAULT_ADAPTIVE_CONFIG" in ast.unparse(n):
            assert {e.get("up_hysteresis", c.up_hysteresis) for e in ast.literal_eval(n.value).values()} == {c.up_hysteresis}


@pytest.mark.parametrize("version", FLAG_RELEASES)
def test_capture_runs_are_the_wheels(version):
    runs = _spec_capture_runs(version)
    # the table's runs are the wheel's up to 256 (tiers end at 64; the last run depends on max_bs)
    assert [[a, b - 1, s] for a, b, s in runs[:4]] == F.controller.capture


def test_hand_read_controller_facts():
    # sglang 0.5.23 adaptive_spec_params.py: AdaptiveStepSlot.__init__ reads warmup_batches 10 and
    # update_interval 5; from 0 steps _recompute_params probes the next candidate ("Probe the
    # smallest positive step after a zero-step nospec interval"); cuda_graph_hook.py captures 1-8,
    # 10-32 by 2, 40-64 by 4 with speculation; observability.py: decode_log_interval = 40.
    assert (F.controller.warmup_batches, F.controller.update_interval) == (10, 5)
    assert F.controller.capture_sizes()[:12] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]
    assert 31 not in F.controller.capture_sizes() and 60 in F.controller.capture_sizes()
    assert F.controller.decode_log_interval == 40
    src = (wheels.unpacked("0.5.23") / PARAMS).read_text(encoding="utf-8")
    assert "if old_steps == 0:" in src and "current_idx = min(current_idx + 1" in src

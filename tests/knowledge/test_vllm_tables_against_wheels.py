"""configs/vllm/*.toml checked against every published vllm wheel they cover, read with `ast`.

The wheels are read member by member over HTTP range requests (tests/support/vllm_wheels.py
says why: ~14 GB for `pip download` of 40 releases). Measured here: all 40 releases 0.10.0 -
0.34.0, cold, ~15 s and 67 MB of extracted members; warm, the cache is read from disk.
Every row is checked on each release of its range; texts and knobs also on the release just
outside (where they must be absent), so a range that is too wide or too narrow fails."""
from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor

import pytest

from dynspec_cli.engines.vllm.knowledge import knowledge
from tests.support import vllm_source as src
from tests.support import vllm_wheels

pytestmark = pytest.mark.wheels

K = knowledge()
RELEASES = K.releases
COVERED = K.versions_in(K.mask(K.covered))


def setup_module(module):
    with ThreadPoolExecutor(4) as ex:  # fetch the members of every release once, in parallel
        list(ex.map(vllm_wheels.members, RELEASES))


def releases_of(spec: str) -> list[str]:
    return K.versions_in(K.mask(spec))


def outside(spec: str) -> list[str]:
    inside = releases_of(spec)
    i, j = RELEASES.index(inside[0]), RELEASES.index(inside[-1])
    return [RELEASES[x] for x in (i - 1, j + 1) if 0 <= x < len(RELEASES)]


def strings_of(version: str, text: str) -> list[str]:
    """String constants (implicit concatenation joined by ast) of the members whose raw source
    holds the text's first words: parsing only those keeps the whole check to seconds."""
    head = text.split("%")[0][:24]
    root = src.root(version)
    out: list[str] = []
    for p in (root / "vllm").rglob("*.py"):
        raw = p.read_text(encoding="utf-8")
        if head.split()[0] in raw and any(w in raw for w in head.split()[1:3]):
            out.extend(src.strings(version, str(p.relative_to(root))))
    return out


def test_releases_are_pypi_releases():
    published = set(vllm_wheels._releases())
    assert set(RELEASES) <= published
    assert "0.15.0" in COVERED and "0.34.0" in COVERED and len(COVERED) == 29


def test_the_table_covers_every_published_release_in_range():
    from packaging.version import Version

    lo, hi = Version(RELEASES[0]), Version(RELEASES[-1])
    published = [v for v in vllm_wheels._releases() if not Version(v).is_prerelease and lo <= Version(v) <= hi]
    assert sorted(published, key=Version) == RELEASES


@pytest.mark.parametrize("row", [r for r in K.lines if r.text], ids=lambda r: r.id)
def test_log_texts(row):
    for v in releases_of(row.versions):
        assert any(row.text in s for s in strings_of(v, row.text)), f"{row.id}: not in vllm {v}"
    for v in outside(row.versions):
        assert not any(row.text in s for s in strings_of(v, row.text)), f"{row.id}: also in vllm {v} (range too narrow)"


@pytest.mark.parametrize("row", [r for r in K.lines if r.text], ids=lambda r: r.id)
def test_patterns_match_their_own_text(row):
    import re

    sample = row.text.replace("%s", "0.33.0").replace("%d", "3").replace("%.2f", "2.50")
    assert re.search(row.pattern, sample), row.id
    assert row.literal in sample


@pytest.mark.parametrize("version", COVERED)
def test_runner_selection(version):
    """The runner row's facts, read from vllm/config/vllm.py and envs.py of the wheel."""
    r = K.runner_range(version)
    envs = vllm_wheels.read(version, "vllm/envs.py") or ""
    prop = src.function(version, "vllm/config/vllm.py", "VllmConfig", "use_v2_model_runner")
    has_v1 = vllm_wheels.read(version, "vllm/v1/worker/gpu_model_runner.py") is not None
    if r.selection == "v2-only":
        assert not has_v1 and "VLLM_USE_V2_MODEL_RUNNER" not in envs
        return
    assert has_v1
    if r.selection == "env-opt-in":
        assert prop is None
        assert 'os.getenv("VLLM_USE_V2_MODEL_RUNNER", "0")' in envs and "bool(\n        int(" in envs
        return
    text = ast.unparse(prop)
    assert 'maybe_convert_bool(\n        os.getenv("VLLM_USE_V2_MODEL_RUNNER", None)' in envs
    assert "envs.VLLM_USE_V2_MODEL_RUNNER" in text and "_get_v2_model_runner_unsupported_features" in text
    assert ("_is_default_v2_model_runner_model" in text) == r.model_gated
    unsup = ast.unparse(src.function(version, "vllm/config/vllm.py", "VllmConfig", "_get_v2_model_runner_unsupported_features"))
    spec_part = unsup[unsup.index("if speculative_config is not None"):]
    if r.v2_methods is not None:
        assert f"speculative_config.method not in {tuple(r.v2_methods)!r}" in spec_part.replace("'", '"').replace('"', "'") \
            or f"speculative_config.method not in {tuple(r.v2_methods)}" in spec_part
    if r.v1_methods is not None:
        assert f"speculative_config.method in {tuple(r.v1_methods)}" in spec_part
    if r.parallel_drafting_ok:
        assert f"speculative_config.method not in {tuple(r.parallel_drafting_ok)}" in spec_part \
            or f"speculative_config.method != {r.parallel_drafting_ok[0]!r}" in spec_part
    assert ("uses_dynamic_speculative_decoding()" in spec_part) == r.dynamic_sd_v1
    assert K.line_by_id[r.fallback_warning].text in {s for s in src.strings(version, "vllm/config/vllm.py")}


METHODS = ["eagle", "eagle3", "mtp", "ngram", "draft_model"]


@pytest.mark.parametrize("version", COVERED)
def test_proposer_per_method(version):
    """Walk each runner's dispatch chain for each method; the class built must be the table's."""
    for runner, read in (("v1", src.v1_proposer), ("v2", src.v2_speculator)):
        for m in METHODS:
            built, _unknown = read(version, m)
            row = K.proposer(version, runner, m)
            assert (row.cls if row else None) == built, f"vllm {version} {runner} method={m}: source builds {built}"
            if row:
                assert row.cls in src.classes(version, row.module), f"{row.cls} not defined in {row.module} ({version})"


@pytest.mark.parametrize("knob", K.knobs, ids=lambda k: f"{k.key}-{k.status}")
def test_knobs(knob):
    def declared(v):
        for member in ("vllm/config/speculative.py", "vllm/config/__init__.py"):
            c = src.classes(v, member).get("SpeculativeConfig")
            if c is not None:
                return any(isinstance(s, ast.AnnAssign) and getattr(s.target, "id", "") == knob.key for s in c.body)
        return False

    def read_outside_config(v):
        root = src.root(v)
        for p in (root / "vllm").rglob("*.py"):
            rel = str(p.relative_to(root))
            if rel.startswith("vllm/config/") or rel == "vllm/engine/arg_utils.py":
                continue
            if knob.key in p.read_text(encoding="utf-8"):
                return rel
        return None

    for v in releases_of(knob.versions):
        if knob.status == "dead":
            assert declared(v), f"{knob.key} not declared in {v}"
            assert read_outside_config(v) is None, f"{knob.key} is read in {read_outside_config(v)} ({v})"
        elif knob.status == "rejected":
            assert not declared(v)
            utils = vllm_wheels.read(v, "vllm/config/utils.py") or ""
            assert 'extra="forbid"' in utils
        else:
            assert declared(v)
            fn = src.function(v, "vllm/config/vllm.py", "VllmConfig", "_maybe_disable_dynamic_sd_for_data_parallel")
            text = ast.unparse(fn)
            assert "data_parallel_size <= 1" in text and f"speculative_config.{knob.key} = None" in text
    for v in outside(knob.versions):
        if knob.status == "dead":
            later = v in releases_of(">=0.17.0")
            assert not declared(v) or not later, v
        elif knob.status == "switched-off":
            fn = src.function(v, "vllm/config/vllm.py", "VllmConfig", "_maybe_disable_dynamic_sd_for_data_parallel")
            assert fn is None, f"{v} also switches {knob.key} off"


def test_fallback_to_v1_is_a_real_dead_path_on_033():
    """The case the issue is about: on 0.33 the V1 runner builds EagleProposer (vllm/v1/spec_decode/
    eagle.py) and V2 EagleSpeculator (eagle/speculator.py) for the same method."""
    assert src.v1_proposer("0.33.0", "eagle3")[0] == "EagleProposer"
    assert src.v2_speculator("0.33.0", "eagle3")[0] == "EagleSpeculator"
    assert "EagleSpeculator" in src.classes("0.33.0", "vllm/v1/worker/gpu/spec_decode/eagle/speculator.py")
    assert "EagleProposer" in src.classes("0.33.0", "vllm/v1/spec_decode/eagle.py")

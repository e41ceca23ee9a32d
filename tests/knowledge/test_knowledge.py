"""dynspec_cli/engines/sglang/knowledge.py and configs/sglang/*.toml, without the network.

The expected outcomes of argument resolution and dispatch are those sglang's real code gave on
a CPU box (../shared/reference/cpu-dryrun.md §1, §3, §4) and those read in the wheels
(tests/knowledge/test_tables_against_wheels.py checks the tables against the wheels)."""
from __future__ import annotations

import pytest
from packaging.version import Version

from dynspec_cli.knowledge import tables
from dynspec_cli.engines.sglang.knowledge import Knowledge, OverlapOutcome, WorkerChoice, knowledge

K = knowledge()
V2 = "SGLANG_ENABLE_SPEC_V2"


def outcome(version, algorithm="EAGLE3", env=None, flags=(), user_disable=False, topk=None, device="cuda"):
    return K.resolve_overlap(version, algorithm, env=env or {}, flags=set(flags), user_disable=user_disable,
                             topk=topk, device=device)


def run(version, algorithm="EAGLE3", multi_layer=False, **kw):
    """(overlap outcome, worker) the way sglang runs them: resolution, then dispatch."""
    o = outcome(version, algorithm, **kw)
    w = None if o.error else K.worker(version, algorithm, o.overlap, multi_layer)
    return o, w


# --- every table loads ---------------------------------------------------------------------------
TABLES = [("releases.toml", tables.ReleasesFile), ("dispatch.toml", tables.DispatchFile),
          ("overlap.toml", tables.OverlapFile), ("warnings.toml", tables.WarningsFile),
          ("modules.toml", tables.ModulesFile), ("log_lines.toml", tables.LogLinesFile)]


@pytest.mark.parametrize("name,struct", TABLES, ids=[t[0] for t in TABLES])
def test_table_loads(name, struct):
    loaded = tables.load_toml(tables.configs_dir() / "sglang" / name, struct)
    assert msgspec_nonempty(loaded)


def msgspec_nonempty(obj) -> bool:
    return any(bool(getattr(obj, f)) for f in obj.__struct_fields__)


def test_knowledge_builds_from_the_tables():
    k = Knowledge()
    assert k.releases == K.releases and len(k.dispatch_ranges) == len(K.dispatch_ranges)


def test_bad_table_names_file_and_key(tmp_path):
    p = tmp_path / "dispatch.toml"
    p.write_text('[[range]]\nversions = ">=0.5.3"\nwhere = "x"\nrules = [{ algorithms = ["EAGLE"], module = "m" }]\n')
    with pytest.raises(tables.ConfigError, match=r"dispatch\.toml.*class.*error"):
        tables.load_toml(p, tables.DispatchFile)
    p.write_text("releases = [")
    with pytest.raises(tables.ConfigError, match="invalid TOML"):
        tables.load_toml(p, tables.ReleasesFile)


# --- releases, masks, spans ----------------------------------------------------------------------
def test_releases_sorted_unique():
    vs = [Version(r) for r in K.releases]
    assert vs == sorted(vs) and len(set(vs)) == len(vs)
    assert K.releases[0] == "0.5.3" and "0.5.12.post1" in K.releases


def test_masks_and_spans():
    m = K.mask(">=0.5.7,<0.5.11")
    assert K.versions_in(m) == ["0.5.7", "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1"]
    assert K.span(m) == "0.5.7 – 0.5.10.post1"
    assert K.span(K.mask_of("0.5.9")) == "0.5.9" and K.single(K.mask_of("0.5.9")) == "0.5.9"
    assert K.single(m) is None and K.span(0) is None
    assert K.span(K.mask_of("0.5.3") | K.mask_of("0.5.9") | K.mask_of("0.5.10")) == "0.5.3, 0.5.9 – 0.5.10"
    assert K.mask(">=0.5.3") == K.all and K.span(K.all) == "0.5.3 – 0.5.23"


def test_versions_outside_the_table_are_unknown():
    for v in ("0.5.2", "0.5.24", "0.5.9.post9", "nonsense", ""):
        assert K.mask_of(v) == 0 and not K.known(v)
    assert K.known("0.5.9") and K.mask_of("0.5.09") == K.mask_of("0.5.9")  # PEP 440 equality
    assert K.resolve_overlap("0.5.99", "EAGLE", env={}, flags=set(), user_disable=False, topk=None) == OverlapOutcome(None, None)
    assert K.worker("0.5.99", "EAGLE", True) is None


def test_aliases():
    assert K.canonical_algorithm("nextn") == "EAGLE" and K.canonical_algorithm("eagle3") == "EAGLE3"
    assert K.canonical_algorithm(None) is None


# --- table consistency ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", K.releases)
def test_each_release_in_exactly_one_range(version):
    bit = K.mask_of(version)
    assert sum(1 for r in K.dispatch_ranges if K.mask(r.versions) & bit) == 1
    assert sum(1 for r in K.overlap_ranges if K.mask(r.versions) & bit) == 1


def test_every_row_covers_some_release():
    specs = ([r.versions for r in K.dispatch_ranges] + [r.versions for r in K.overlap_ranges]
             + [w.versions for w in K.warnings] + [c.versions for c in K.classes]
             + [s for x in K.log_lines for s in x.versions_by_form.values()] + [K.max_running_reset.versions])
    for spec in specs:
        assert K.mask(spec), spec


def test_class_rows_of_one_name_do_not_overlap():
    for c in K.classes:
        for d in K.classes:
            if c is not d and c.name == d.name:
                assert not K.mask(c.versions) & K.mask(d.versions), (c.name, c.versions, d.versions)
                assert c.module == d.module


@pytest.mark.parametrize("version", K.releases)
def test_dispatched_classes_have_module_rows(version):
    for rule in K.dispatch_rules(version).rules:
        if rule.cls:
            row = K.class_row(version, rule.cls)
            assert row is not None and row.module == rule.module, (version, rule.cls)


def _algorithms_in(version):
    return {a for rule in K.dispatch_rules(version).rules for a in rule.algorithms}


@pytest.mark.parametrize("version", K.releases)
def test_overlap_warnings_exist_in_that_release(version):
    """A rule's warning (and the switch's) is a warnings.toml row whose range holds the release,
    for the algorithms the release has."""
    r = K.overlap_range(version)
    ids = [rule.warning for rule in r.rules if rule.warning and (rule.algorithms is None or set(rule.algorithms) & _algorithms_in(version))]
    ids += [r.switch.warning] if r.switch.warning else []
    for wid in ids:
        w = K.warning_by_id.get(wid)
        assert w is not None, wid
        assert K.mask(w.versions) & K.mask_of(version), f"{wid} ({w.versions}) is not logged by {version}"


def test_warning_ids_unique_and_log_line_ids_unique():
    assert len({w.id for w in K.warnings}) == len(K.warnings)
    assert len({x.id for x in K.log_lines}) == len(K.log_lines)


# --- argument resolution and dispatch: the cpu-dryrun matrix ---------------------------------------
def test_059_env_unset_topk4_runs_v1():
    o, w = run("0.5.9", topk=4)
    assert o.overlap is False and o.error is None and o.warning == "overlap-off-spec-v2-off"
    assert w == WorkerChoice("eagle_worker", "EAGLEWorker")


def test_059_env_true_topk4_is_an_error():
    o, w = run("0.5.9", env={V2: "True"}, topk=4)
    assert o.error == "Spec v2 currently only supports topk = 1 for speculative decoding."
    assert o.warning == "spec-v2-on" and w is None  # the warning is logged before the ValueError


def test_059_env_true_topk1_runs_v2():
    o, w = run("0.5.9", env={V2: "True"}, topk=1)
    assert o.overlap is True and o.switch_value is True and w == WorkerChoice("eagle_worker_v2", "EAGLEWorkerV2")


def test_059_other_cases():
    assert run("0.5.9", topk=1)[1].cls == "EAGLEWorker"
    assert run("0.5.9", "EAGLE", env={V2: "True"}, topk=1)[1].cls == "EAGLEWorkerV2"
    assert run("0.5.9", "STANDALONE", env={V2: "True"}, topk=1)[1].cls == "StandaloneWorkerV2"
    assert run("0.5.9", "STANDALONE", topk=1)[1].cls == "StandaloneWorker"
    assert run("0.5.9", env={V2: "True"}, topk=1, multi_layer=True)[1].cls == "MultiLayerEagleWorkerV2"
    o, w = run("0.5.9", "NGRAM")
    assert o.overlap is False and o.warning == "ngram-overlap-off" and w.cls == "NGRAMWorker"


def test_nextn_is_eagle():
    assert run("0.5.9", "NEXTN", topk=4) == run("0.5.9", "EAGLE", topk=4)
    assert run("0.5.9", "NEXTN", env={V2: "1"}, topk=1)[1].cls == "EAGLEWorkerV2"
    assert run("0.5.23", "NEXTN")[1].cls == "EAGLEWorkerV2"


def test_env_parsing_like_envbool():
    assert outcome("0.5.9", env={V2: "yes"}, topk=1).overlap is True
    assert outcome("0.5.9", env={V2: "Y"}, topk=1).overlap is True
    assert outcome("0.5.11", env={V2: "0"}).overlap is False
    assert outcome("0.5.11", env={V2: "n"}).reason == "SGLANG_ENABLE_SPEC_V2=False"
    # an invalid value falls back to the release's default (False before 0.5.11, True after)
    assert outcome("0.5.9", env={V2: "maybe"}, topk=1).switch_value is False
    assert outcome("0.5.11", env={V2: "maybe"}).switch_value is True


def test_0512post1_topk4_falls_back_to_v1():
    o, w = run("0.5.12.post1", topk=4)
    assert (o.overlap, o.warning, o.reason) == (False, "spec-v1-used", "spec v2 currently only supports topk = 1")
    assert w.cls == "EAGLEWorker"
    o, w = run("0.5.12.post1", topk=1)
    assert (o.overlap, o.warning, w.cls) == (True, "spec-v2-default", "EAGLEWorkerV2")
    assert run("0.5.12.post1", user_disable=True)[0].reason == "overlap schedule is disabled"
    assert run("0.5.11", env={V2: "False"})[1].cls == "EAGLEWorker"


@pytest.mark.parametrize("version", K.versions_in(K.mask(">=0.5.13")))
@pytest.mark.parametrize("env", [{}, {V2: "True"}, {V2: "False"}])
@pytest.mark.parametrize("topk", [1, 4])
def test_0513_and_later_always_v2(version, env, topk):
    o, w = run(version, env=env, topk=topk)
    assert o.error is None and w == WorkerChoice("eagle_worker_v2", "EAGLEWorkerV2")
    assert run(version, "STANDALONE", env=env, topk=topk)[1].cls == "StandaloneWorkerV2"
    assert run(version, env=env, topk=topk, multi_layer=True)[1].cls == "MultiLayerEagleWorkerV2"
    assert o.overlap is (False if version.startswith("0.5.13") and env.get(V2) == "False" else True)


def test_env_removed_then_ignored():
    assert outcome("0.5.16", env={V2: "True"}).switch_value is None
    assert K.overlap_range("0.5.16").switch.warning == "spec-v2-env-removed"
    assert K.overlap_range("0.5.23").switch.kind == "ignored" and K.overlap_range("0.5.23").switch.warning is None


def test_0523_cpu_turns_overlap_off_but_keeps_v2():
    o, w = run("0.5.23", device="cpu", topk=4)
    assert (o.overlap, o.warning) == (False, "cpu-overlap-off") and w.cls == "EAGLEWorkerV2"
    o = outcome("0.5.23", device="cpu", user_disable=True)  # already off: only the sync-v2 warning
    assert (o.overlap, o.warning) == (False, "non-overlap-spec-v2")
    o, w = run("0.5.23", "NGRAM")
    assert o.overlap is True and w.cls == "NGRAMWorker"
    assert outcome("0.5.15", device="cpu").overlap is True  # the CPU rule starts in 0.5.16


def test_early_switches():
    # 0.5.3: no switch, EAGLE family always non-overlap
    assert run("0.5.3", "EAGLE", env={V2: "True"}, flags={"--enable-beta-spec"})[1].cls == "EAGLEWorker"
    # 0.5.3.post2-0.5.4: the --enable-beta-spec flag
    o, w = run("0.5.4", "EAGLE", flags={"--enable-beta-spec"})
    assert (o.overlap, o.warning, w.cls) == (True, "beta-spec-on", "EAGLEWorkerV2")
    assert run("0.5.4", "EAGLE", env={V2: "True"})[1].cls == "EAGLEWorker"  # the env var is not read yet
    o, w = run("0.5.4", "EAGLE3", flags={"--enable-beta-spec"})  # EAGLE3 keeps the user's setting
    assert (o.overlap, o.warning, w.cls) == (True, None, "EAGLEWorkerV2")
    assert run("0.5.4", "EAGLE3", flags={"--enable-beta-spec"}, user_disable=True)[1].cls == "EAGLEWorker"
    # 0.5.4.post1+: the env var
    assert run("0.5.4.post1", "EAGLE", env={V2: "1"})[1].cls == "EAGLEWorkerV2"
    assert run("0.5.5", "STANDALONE", env={V2: "1"})[1].cls == "StandaloneWorker"
    # 0.5.7: the env var overrides --disable-overlap-schedule
    o, w = run("0.5.7", env={V2: "True"}, topk=1, user_disable=True)
    assert o.overlap is True and w.cls == "EAGLEWorkerV2"
    assert run("0.5.7", "NGRAM", multi_layer=True)[1].cls == "MultiLayerEagleWorker"  # no algorithm check


def test_algorithm_introductions():
    assert K.worker("0.5.10.post1", "DFLASH", False) is None
    assert K.worker("0.5.11", "DFLASH", False).cls == "DFlashWorker"
    assert K.worker("0.5.11", "DFLASH", True).error == "DFLASH does not support overlap scheduling (spec v2)."
    assert K.worker("0.5.11", "FROZEN_KV_MTP", False) is None
    assert K.worker("0.5.12", "FROZEN_KV_MTP", False).cls == "FrozenKVMTPWorker"
    assert K.worker("0.5.13", "NGRAM", True).error.startswith("Speculative algorithm NGRAM")
    assert K.worker("0.5.14", "NGRAM", True).cls == "NGRAMWorker"
    assert K.worker("0.5.14", "DFLASH", True).cls == "DFlashWorkerV2"
    assert K.worker("0.5.15.post1", "DSPARK", True) is None and K.worker("0.5.16", "DSPARK", True).cls == "DSparkWorkerV2"
    assert K.worker("0.5.19", "UNO", True) is None and K.worker("0.5.20", "UNO", False).cls == "UnoWorkerV2"
    # DFLASH resolution forces overlap off in 0.5.11-0.5.13, so the V1 worker runs
    o, w = run("0.5.13", "DFLASH")
    assert (o.overlap, o.warning, w.cls) == (False, "dflash-overlap-off", "DFlashWorker")


def test_workers_for_a_span():
    m = K.mask(">=0.5.9,<0.5.13")
    got = K.workers_for(m, ["EAGLE3"], [True, False], [False])
    assert set(got) == {WorkerChoice("eagle_worker_v2", "EAGLEWorkerV2"), WorkerChoice("eagle_worker", "EAGLEWorker")}
    assert all(v == m for v in got.values())
    got = K.workers_for(K.mask(">=0.5.12,<0.5.14"), ["EAGLE3"], [False], [False])
    assert K.span(got[WorkerChoice("eagle_worker", "EAGLEWorker")]) == "0.5.12 – 0.5.12.post1"
    assert K.span(got[WorkerChoice("eagle_worker_v2", "EAGLEWorkerV2")]) == "0.5.13 – 0.5.13.post1"


def test_max_running_requests_reset():
    r = K.max_running_reset
    assert r.value == 48 and {"EAGLE", "EAGLE3", "STANDALONE", "NGRAM"} <= set(r.algorithms)
    assert "UNO" not in r.algorithms and K.mask(r.versions) & K.mask_of("0.5.3")


# --- classes and MROs ------------------------------------------------------------------------------
def test_mro():
    assert K.mro("0.5.9", "StandaloneWorker") == ["StandaloneWorker", "EAGLEWorker", "TpModelWorker"]
    assert K.mro("0.5.23", "StandaloneWorkerV2") == ["StandaloneWorkerV2", "EAGLEWorkerV2", "BaseSpecWorker", "ABC"]
    assert K.mro("0.5.3.post2", "EAGLEWorkerV2") == ["EAGLEWorkerV2", "EAGLEWorker", "TpModelWorker"]
    assert K.mro("0.5.4", "EAGLEWorkerV2") == ["EAGLEWorkerV2", "BaseSpecWorker", "ABC"]
    assert K.mro("0.5.14", "FrozenKVMTPWorkerV2") == ["FrozenKVMTPWorkerV2", "EAGLEWorkerV2", "BaseSpecWorker", "ABC"]
    assert K.mro("0.5.13", "FrozenKVMTPWorkerV2") == ["FrozenKVMTPWorkerV2", "FrozenKVMTPWorker", "TpModelWorker"]
    assert K.mro("0.5.13", "NGRAMWorker") == ["NGRAMWorker"]
    assert K.mro("0.5.14", "NGRAMWorker") == ["NGRAMWorker", "BaseSpecWorker", "ABC"]
    assert K.mro("0.5.23", "DFlashWorkerV2")[1] == "BaseSpecWorker"
    assert K.mro("0.5.13", "EAGLEWorker") == ["EAGLEWorker"]  # no row: the class is gone


def test_class_masks_and_modules():
    assert K.span(K.class_mask("EAGLEWorker")) == "0.5.3 – 0.5.12.post1"
    assert K.span(K.class_mask("EAGLEWorkerV2")) == "0.5.3.post2 – 0.5.23"
    assert K.span(K.class_mask("UnoWorkerV2")) == "0.5.20 – 0.5.23"
    assert K.class_mask("NoSuchWorker") == 0 and K.module_of_class("NoSuchWorker") is None
    assert K.module_of_class("DSparkWorkerV2") == "dspark_components.dspark_worker_v2"
    assert K.class_row("0.5.3", "BaseSpecWorker") is None and K.class_row("0.5.4", "BaseSpecWorker").module == "base_spec_worker"


# --- warnings and log lines ------------------------------------------------------------------------
def test_warning_matchers():
    rows = {w.id: rx for w, rx in K.warning_matchers}
    assert rows["spec-v2-on"] is None  # exact texts are substrings
    m = rows["spec-v1-used"].search("Spec v1 is used for eagle/eagle3/standalone speculative decoding because spec v2 currently only supports topk = 1.")
    assert m and m["reason"] == "spec v2 currently only supports topk = 1"


def test_warning_fits():
    assert K.warning_fits("0.5.9", "EAGLE3", "overlap-off-spec-v2-off")
    assert not K.warning_fits("0.5.9", "NGRAM", "overlap-off-spec-v2-off")
    assert K.warning_fits("0.5.9", "NGRAM", "ngram-overlap-off")
    assert K.warning_fits("0.5.23", "NGRAM", "launch-server-entrypoint")  # not an overlap warning


LOG_SAMPLES = {
    "torch-distributed": ["Init torch distributed begin.", "Init parallel ends. elapsed=0.52 s"],
    "kv-cache": ["KV Cache is allocated. #tokens: 1000, KV size: 1.00 GB", "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 5"],
    "cuda-graph": ["Capture cuda graph begin. This can take up to several minutes. avail mem=70.00 GB",
                   "Capture target verify CUDA graph end. bs=[1, 2], elapsed=3.00 s, mem usage=1.00 GB, avail mem=6.00 GB.",
                   "Capture piecewise CUDA graph begin. avail mem=7.00 GB"],
    "draft-cuda-graph": ["Capture draft cuda graph begin. This can take up to several minutes. avail mem=7.00 GB",
                         "Capture draft extend CUDA graph begin. step=1, avail mem=7.00 GB",
                         "Capture Frozen-KV MTP draft cuda graph begin.", "Capture UNO tree draft CUDA graph end. elapsed=1 s",
                         "Capture single-CG draft extend begin. This can take several minutes. avail mem=7.00 GB"],
    "checkpoint-shards": ["Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00it/s]",
                          "Multi-thread loading pt checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.00it/s]"],
    "watchdog-timeout": ["Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
                         "Watchdog timeout (self.watchdog_timeout=300)"],
}


@pytest.mark.parametrize("lid", sorted(LOG_SAMPLES))
def test_log_line_samples(lid):
    import re
    row = next(x for x in K.log_lines if x.id == lid)
    others = [x for x in K.log_lines if x.id in ("cuda-graph", "draft-cuda-graph") and x.id != lid]
    for line in LOG_SAMPLES[lid]:
        assert row.literal in line and re.search(row.pattern, line), line
        if lid in ("cuda-graph", "draft-cuda-graph"):  # a capture line is one or the other
            assert not any(re.search(o.pattern, line) for o in others), line

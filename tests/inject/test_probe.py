"""The in-server probe against the stand-in sglang package: real process trees (launcher, spawned
schedulers per TP rank, detokenizer, resource tracker) under Python 3.10, 3.11, 3.12 (and 3.13 when
installed), injected exactly as dynspec does it (dynspec_cli.engines.sglang.probe_setup.probe_env). No mocks."""
from __future__ import annotations

import hashlib
import os
import signal
import sys
import textwrap
import time

import pytest

from dynspec_cli.engines.sglang.probe_setup import EVENTS, PREFIX, PROBE_DIR, ROLES
from tests.inject.standin_pkg.harness import (PY310, PY312, STANDIN_DIR, Server, base_env, injected_env,
                                              interpreters, py_id, run, standin_cmd, v1_forward, v2_forward,
                                              v2_init, _version)

PYTHONS = interpreters()
STANDIN_VERSION = "0.5.99.dev0+standin"
V2_FILE = STANDIN_DIR / "sglang_standin" / "srt" / "speculative" / "eagle_worker_v2.py"
V1_FILE = STANDIN_DIR / "sglang_standin" / "srt" / "speculative" / "eagle_worker.py"


def expected_mode(python: str, monitoring: bool = True) -> str:
    return "monitoring" if monitoring and _version(python) >= (3, 12) else "code"


def sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def assert_well_formed(run_) -> None:
    """Every probe line is one whole JSON object of schema v2 with the common fields."""
    assert run_.probe_lines, "no probe lines at all"
    for rec in run_.records:
        assert rec["v"] == 2 and rec["event"] in EVENTS, rec
        assert isinstance(rec["pid"], int) and isinstance(rec["ppid"], int) and isinstance(rec["ts"], float)
        assert rec["role"] in ROLES, rec
    for line in run_.probe_lines:
        assert len(line.encode()) < 4096, "a probe line longer than PIPE_BUF is not atomic"


def coverage_of(proc, index: int, reason: str = "exit") -> dict:
    """The target's entry in the process's last coverage snapshot for `reason`."""
    snapshots = [c for c in proc.events("coverage") if c["reason"] == reason]
    assert snapshots, f"pid {proc.pid}: no coverage line for {reason!r}"
    (entry,) = [e for e in snapshots[-1]["targets"] if e["target"] == index]
    return entry


# --------------------------------------------------------------------------------------------------
# what each process reports


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_probe_reports_every_process_of_a_spec_v2_launch(python):
    fwd, init, v1 = v2_forward(), v2_init(), v1_forward()
    env = injected_env([fwd.as_target(), init.as_target(), v1.as_target()])
    r = run(standin_cmd(python, "--tp-size", "2", "--speculative-algorithm", "EAGLE",
                        "--speculative-disable-batch-threshold", "4", "--steps", "6", "--batch-sizes", "1,8"), env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert_well_formed(r)
    assert r.errors() == []
    procs = r.procs()
    for p in procs.values():
        assert len(p.events("start")) == 1, p.records

    (launcher,) = r.with_role("launcher")
    start = launcher.one("start")
    assert start["started_as"] == "module:sglang_standin.launch_server" and start["ok"] is True
    assert launcher.ppid == os.getpid()
    assert start["python"] == ".".join(map(str, _version(python)))
    assert start["mode"] == expected_mode(python)
    sg = launcher.one("sglang")
    assert sg["version"] == STANDIN_VERSION and sg["path"] == str(STANDIN_DIR / "sglang_standin")
    sa = launcher.one("server_args")
    assert "run_server" in sa["seen_at"] and sa["type"] == "sglang_standin.srt.server_args.ServerArgs"
    assert sa["args"]["speculative_algorithm"] == "EAGLE"
    assert sa["args"]["speculative_disable_batch_threshold"] == 4
    assert sa["args"]["disable_overlap_schedule"] is False and sa["args"]["tp_size"] == 2

    schedulers = r.with_role("scheduler")
    assert [s.rank for s in schedulers] == [{"tp": 0, "pp": 0, "ep": 0}, {"tp": 1, "pp": 0, "ep": 0}]
    for tp, s in enumerate(schedulers):
        assert s.ppid == launcher.pid
        entry = s.one("entry")
        assert entry["entry"] == "sglang_standin.srt.managers.scheduler.run_scheduler_process"
        assert entry["gpu_id"] == tp and entry["started_as"] == "spawn-child"
        assert s.one("start")["role"] == "other"  # before the entry function is known
        assert s.one("sglang")["version"] == STANDIN_VERSION
        assert s.one("server_args")["args"]["speculative_disable_batch_threshold"] == 4

        mod = s.one("module")
        assert mod["module"] == "sglang_standin.srt.speculative.eagle_worker_v2" and mod["worker_module"] is True
        assert mod["sha256"] == sha(V2_FILE)
        assert [(t["target"], t["status"], t["mode"]) for t in mod["targets"]] == [
            (0, "instrumented", expected_mode(python)), (1, "instrumented", expected_mode(python))]

        w = s.one("worker")
        assert (w["module"], w["class"]) == ("sglang_standin.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2")
        assert w["file"] == str(V2_FILE) and w["sha256"] == sha(V2_FILE)
        assert w["mro"] == ["sglang_standin.srt.speculative.eagle_worker_v2.EAGLEWorkerV2",
                            "sglang_standin.srt.speculative.eagle_worker_v2.BaseSpecWorker", "builtins.object"]
        assert {(p["class"], p["in_mro"]) for p in w["patched_in_mro"]} == {("EAGLEWorkerV2", True),
                                                                          ("EAGLEWorker", False)}

        fn_hits = [h for h in s.events("hit") if "line" not in h and h["calls"] == 1]
        assert [h["function"] for h in fn_hits] == ["EAGLEWorkerV2.__init__", "EAGLEWorkerV2.forward_batch_generation"]
        assert fn_hits[0]["first_ts"] <= fn_hits[1]["first_ts"] <= time.time()
        line_hits = sorted(h["line"] for h in s.events("hit") if "line" in h and h["target"] == 0)
        assert line_hits == fwd.runs

        c = coverage_of(s, 0)
        assert c["status"] == "instrumented" and c["mode"] == expected_mode(python)
        assert c["calls"] == 6 and c["first_ts"] == fn_hits[1]["first_ts"]
        assert (c["executed"], c["missed"], c["not_code"]) == (fwd.runs, fwd.never, fwd.nocode)
        c = coverage_of(s, 1)
        assert c["calls"] == 1 and c["executed"] == init.runs and c["missed"] == []
        (cov,) = s.events("coverage")
        assert cov["not_loaded"] == [2]  # the V1 module was never imported: dispatch chose V2

    (detok,) = r.with_role("detokenizer")
    assert detok.one("entry")["entry"].endswith("detokenizer_manager.run_detokenizer_process")
    assert detok.ppid == launcher.pid and detok.events("worker") == []
    trackers = [p for p in procs.values() if p.one("start")["started_as"] == "resource-tracker"]
    assert len(trackers) == 1 and trackers[0].role == "other"
    assert set(procs) == {launcher.pid, detok.pid, trackers[0].pid, *(s.pid for s in schedulers)}
    # the launcher never loaded a patched module; its exit snapshot says so
    assert launcher.one("coverage")["targets"] == [] and launcher.one("coverage")["not_loaded"] == [0, 1, 2]


@pytest.mark.parametrize("python,monitoring", [(p, True) for p in PYTHONS] + [(PY312, False)],
                         ids=lambda v: py_id(v) if isinstance(v, str) else ("" if v else "no-monitoring"))
def test_probe_v1_dispatch_and_saturated_counts(python, monitoring):
    """topk > 1 makes the stand-in fall back to spec v1 (as sglang 0.5.11+ does): the V1 class is the
    one instantiated, the V2 patch never loads; counts stop at count_limit and say so."""
    fwd1, fwd2 = v1_forward(), v2_forward()
    env = injected_env([fwd2.as_target(), fwd1.as_target()], count_limit=3, monitoring=monitoring)
    r = run(standin_cmd(python, "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2",
                        "--speculative-disable-batch-threshold", "4", "--steps", "7"), env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.errors() == []
    (launcher,) = r.with_role("launcher")
    assert launcher.one("server_args")["args"]["disable_overlap_schedule"] is True
    (s,) = r.with_role("scheduler")
    w = s.one("worker")
    assert w["class"] == "EAGLEWorker" and w["file"] == str(V1_FILE) and w["sha256"] == sha(V1_FILE)
    assert w["mro"][:2] == ["sglang_standin.srt.speculative.eagle_worker.EAGLEWorker",
                            "sglang_standin.srt.managers.tp_worker.TpModelWorker"]
    assert {(p["class"], p["in_mro"]) for p in w["patched_in_mro"]} == {("EAGLEWorkerV2", False),
                                                                      ("EAGLEWorker", True)}
    assert [h["calls"] for h in s.events("hit") if "line" not in h] == [1, ">=3"]
    c = coverage_of(s, 1)
    assert c["mode"] == expected_mode(python, monitoring) and c["calls"] == ">=3"
    assert (c["executed"], c["missed"], c["not_code"]) == (fwd1.runs, fwd1.never, fwd1.nocode)
    assert s.one("coverage")["not_loaded"] == [0]


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_probe_subclass_worker_has_the_patched_class_in_its_mro(python):
    fwd1 = v1_forward()
    env = injected_env([fwd1.as_target()])
    r = run(standin_cmd(python, "--speculative-algorithm", "STANDALONE", "--steps", "2"), env)
    assert r.returncode == 0 and r.errors() == []
    (s,) = r.with_role("scheduler")
    w = s.one("worker")  # once per process, although EAGLEWorker.__new__ runs too (super chain)
    assert w["class"] == "StandaloneWorker" and w["module"].endswith("speculative.standalone_worker")
    assert w["mro"][1] == "sglang_standin.srt.speculative.eagle_worker.EAGLEWorker"
    assert w["patched_in_mro"] == [{"class": "EAGLEWorker", "file": fwd1.module_file, "in_mro": True}]
    mods = {m["module"]: m for m in s.events("module")}
    assert set(mods) == {"sglang_standin.srt.speculative.eagle_worker",
                         "sglang_standin.srt.speculative.standalone_worker"}
    c = coverage_of(s, 0)  # the inherited, patched method ran for the subclass
    assert c["calls"] == 2 and c["executed"] == [ln for ln in fwd1.runs if ln != fwd1.runs[1]]


def test_probe_absolute_path_lines_only_and_mismatched_targets(tmp_path):
    """Targets by absolute path, by lines only (the probe finds the function), a patched copy that is
    not the file the server imports, and a function that does not exist."""
    fwd = v2_forward()
    copy = tmp_path / "sglang_standin" / "srt" / "speculative" / "eagle_worker_v2.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(V2_FILE.read_text())
    targets = [
        fwd.as_target(absolute=True),
        {"file": str(V2_FILE), "class": "EAGLEWorkerV2", "lines": fwd.runs},
        {**fwd.as_target(), "file": str(copy)},
        {**fwd.as_target(), "function": "no_such_method"},
    ]
    r = run(standin_cmd(sys.executable, "--speculative-algorithm", "EAGLE", "--steps", "2"), injected_env(targets))
    assert r.returncode == 0 and r.errors() == []
    (s,) = r.with_role("scheduler")
    by = {e["target"]: e for e in s.one("coverage")["targets"]}
    assert by[0]["status"] == "instrumented" and by[0]["executed"] == fwd.runs[:1] + fwd.runs[2:]
    assert by[1]["status"] == "instrumented" and by[1]["function"] == "EAGLEWorkerV2.forward_batch_generation"
    assert by[1]["executed"] == by[0]["executed"]
    assert by[2]["status"] == "other-file" and str(copy) in by[2]["detail"] and str(V2_FILE) in by[2]["detail"]
    assert by[3]["status"] == "unresolved" and "no_such_method" in by[3]["detail"]
    (mod,) = s.events("module")
    assert [t["status"] for t in mod["targets"]] == ["instrumented", "instrumented", "other-file", "unresolved"]


FACTORY_MODULE = textwrap.dedent("""\
    def make():
        class Worker:
            def step(self, x):
                if x > 2:  # PATCH
                    return x * 2  # PATCH
                return -x
        return Worker


    Worker = make()


    class Plain:
        def step(self, x):
            if x > 2:  # PATCH
                return x * 2  # PATCH
            return -x
    """)


def _factory_targets(path):
    lines = [n for n, text in enumerate(FACTORY_MODULE.splitlines(), 1) if text.endswith("# PATCH")]
    return [{"file": str(path), "class": "Worker", "function": "step", "lines": lines[:2]},
            {"file": str(path), "class": "Plain", "function": "step", "lines": lines[2:]}], lines


@pytest.mark.parametrize("python", [PY310, PY312], ids=py_id)
def test_probe_falls_back_to_a_wrapper_for_a_class_made_inside_a_function(python, tmp_path):
    (tmp_path / "factory.py").write_text(FACTORY_MODULE)
    targets, lines = _factory_targets(tmp_path / "factory.py")
    code = ("import factory\nfor cls in (factory.Worker, factory.Plain):\n"
            "    w = cls()\n    [w.step(i) for i in range(6)]")
    r = run([python, "-c", code], injected_env(targets, extra_paths=[tmp_path], monitoring=False, count_limit=4))
    assert r.returncode == 0 and r.errors() == [], r.stderr
    (cov,) = [rec for rec in r.records if rec["event"] == "coverage"]
    wrapped, swapped = cov["targets"]
    assert (wrapped["mode"], wrapped["calls"], wrapped["executed"]) == ("wrap", ">=4", lines[:2])
    assert wrapped["traced_calls"] >= 1
    assert (swapped["mode"], swapped["calls"], swapped["executed"]) == ("code", ">=4", lines[2:])
    (mod,) = [rec for rec in r.records if rec["event"] == "module"]
    assert "defined inside a function" in mod["targets"][0]["detail"]


def test_probe_uses_code_swap_when_every_monitoring_id_is_taken(tmp_path):
    (tmp_path / "factory.py").write_text(FACTORY_MODULE)
    targets, lines = _factory_targets(tmp_path / "factory.py")
    code = ("import sys\nsys.monitoring.use_tool_id(3, 'a')\nsys.monitoring.use_tool_id(4, 'b')\n"
            "import factory\nw = factory.Plain()\n[w.step(i) for i in range(6)]")
    r = run([PY312, "-c", code], injected_env(targets[1:], extra_paths=[tmp_path]))
    assert r.returncode == 0 and r.errors() == [], r.stderr
    (cov,) = [rec for rec in r.records if rec["event"] == "coverage"]
    assert (cov["targets"][0]["mode"], cov["targets"][0]["calls"], cov["targets"][0]["executed"]) == (
        "code", 6, lines[2:])


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_probe_leaves_the_hot_code_untouched_after_count_limit(python, tmp_path):
    """Past count_limit calls (all patch lines seen) the patched function runs exactly its own bytecode:
    3.12+: no INSTRUMENTED_* instruction left; 3.10/3.11: the original code object is back."""
    (tmp_path / "factory.py").write_text(FACTORY_MODULE)
    targets, lines = _factory_targets(tmp_path / "factory.py")
    code = textwrap.dedent("""
        import dis, sys, factory
        before = factory.Plain.step.__code__
        w = factory.Plain()
        for i in range(12):
            w.step(i)
        code = factory.Plain.step.__code__
        if sys.version_info >= (3, 12):
            print(sum("INSTRUMENTED" in i.opname for i in dis.get_instructions(code, adaptive=True)))
        else:
            print(int("__import__" in before.co_names), int("__import__" in code.co_names))
    """)
    r = run([python, "-c", code], injected_env(targets[1:], extra_paths=[tmp_path], count_limit=10))
    assert r.returncode == 0 and r.errors() == [], r.stderr
    assert r.stdout == ("0\n" if _version(python) >= (3, 12) else "1 0\n")
    assert [h["calls"] for h in r.records if h["event"] == "hit" and "line" not in h] == [1, ">=10"]


# --------------------------------------------------------------------------------------------------
# the server's own behaviour is unchanged


def _plain_and_probed(python, args, targets=None, **options):
    plain = run(standin_cmd(python, *args), base_env())
    probed = run(standin_cmd(python, *args), injected_env(targets or [v2_forward().as_target()], **options))
    return plain, probed


def assert_same_behaviour(plain, probed):
    assert probed.returncode == plain.returncode
    assert probed.stdout == plain.stdout
    assert probed.other_stderr == plain.other_stderr
    assert plain.probe_lines == []


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_probe_leaves_output_exit_code_and_tracebacks_unchanged(python):
    """Exit code 3, the worker's log lines, and a traceback raised inside the patched function (the
    probe instruments that very function): all identical with and without the probe."""
    targets = [v2_forward().as_target(), v2_init().as_target()]
    plain, probed = _plain_and_probed(python, ["--tp-size", "2", "--speculative-algorithm", "EAGLE",
                                               "--exit-code", "3"], targets)
    assert plain.returncode == 3
    assert_same_behaviour(plain, probed)
    plain, probed = _plain_and_probed(python, ["--speculative-algorithm", "EAGLE", "--crash-in-forward"], targets)
    assert plain.returncode != 0 and "RuntimeError: standin: forward failed" in plain.stderr
    assert_same_behaviour(plain, probed)
    assert "_dynspec_probe" not in "\n".join(probed.other_stderr)
    (s,) = probed.with_role("scheduler")
    assert coverage_of(s, 0)["calls"] == 1  # it did run, and raised


def test_probe_worker_init_failure_passes_through_unchanged():
    plain, probed = _plain_and_probed(sys.executable, ["--speculative-algorithm", "EAGLE", "--crash-in-worker"])
    assert "RuntimeError: standin: worker init failed" in plain.stderr
    assert_same_behaviour(plain, probed)
    (s,) = probed.with_role("scheduler")
    assert s.one("worker")["class"] == "EAGLEWorkerV2"


@pytest.mark.parametrize("python", [PY310, sys.executable, PY312], ids=py_id)
@pytest.mark.parametrize("breakage", ["raise", "syntax"])
def test_probe_import_failure_of_the_patched_module_reads_as_before(python, breakage, tmp_path):
    """The patched worker module fails while it is imported (the probe's loader hook is on that very
    import): the traceback is the same, without probe frames."""
    import shutil

    shutil.copytree(STANDIN_DIR / "sglang_standin", tmp_path / "sglang_standin")
    broken = tmp_path / "sglang_standin" / "srt" / "speculative" / "eagle_worker_v2.py"
    extra = ("raise RuntimeError('standin: eagle_worker_v2 is broken')\n" if breakage == "raise"
             else "def oops(:\n")
    broken.write_text(broken.read_text() + extra)
    args = standin_cmd(python, "--speculative-algorithm", "EAGLE")
    plain = run(args, base_env([tmp_path]))
    probed = run(args, injected_env([v2_forward().as_target()], extra_paths=[tmp_path]))
    expected = "RuntimeError: standin: eagle_worker_v2 is broken" if breakage == "raise" else "SyntaxError"
    assert expected in plain.stderr
    assert_same_behaviour(plain, probed)
    assert "_dynspec_probe" not in "\n".join(probed.other_stderr) and "importlib" not in plain.stderr
    (s,) = probed.with_role("scheduler")
    assert s.events("module") == [] and s.one("coverage")["not_loaded"] == [0]


def test_probe_absent_without_env():
    """--no-probe equivalent: nothing injected prints nothing; the probe folder on PYTHONPATH without
    DYNSPEC_PROBE prints nothing either and changes nothing."""
    args = ["--tp-size", "2", "--speculative-algorithm", "EAGLE"]
    plain = run(standin_cmd(sys.executable, *args), base_env())
    dormant = run(standin_cmd(sys.executable, *args), base_env([PROBE_DIR]))
    assert PREFIX.strip() not in plain.stderr + plain.stdout
    assert_same_behaviour(plain, dormant)


FAULTS = ["config", "start", "import-hook", "module", "instrument", "worker", "hit", "line", "entry", "sglang",
          "server-args", "coverage"]


@pytest.mark.parametrize("fault", FAULTS)
def test_probe_internal_failure_is_contained(fault):
    targets = [v2_forward().as_target(), v2_init().as_target()]
    args = ["--speculative-algorithm", "EAGLE", "--exit-code", "3"]
    plain, probed = _plain_and_probed(sys.executable, args, targets, fault=fault)
    assert_same_behaviour(plain, probed)
    errors = probed.errors()
    assert errors and {e["where"] for e in errors} == {fault}, errors
    assert all("injected fault at %s" % fault in e["error"] for e in errors)
    assert all(len([e for e in errors if e["pid"] == pid]) <= 25 for pid in {e["pid"] for e in errors})


@pytest.mark.parametrize("python", [PY310, PY312], ids=py_id)
@pytest.mark.parametrize("fault", ["hit", "line", "instrument", "worker"])
def test_probe_internal_failure_is_contained_per_mode(python, fault):
    plain, probed = _plain_and_probed(python, ["--speculative-algorithm", "EAGLE", "--crash-in-forward"],
                                      fault=fault)
    assert_same_behaviour(plain, probed)
    assert {e["where"] for e in probed.errors()} == {fault}


def test_probe_with_a_part_missing_still_changes_nothing(tmp_path):
    """A probe folder whose reporting module is missing (a partial copy to a host): errors are reported,
    the output and exit code stay the same, and SIGTERM still kills the launcher."""
    from dynspec_cli.engines.sglang.probe_setup import probe_files, probe_env

    pdir = tmp_path / "probe"
    pdir.mkdir()
    for name, data in probe_files().items():
        if name != "_dynspec_probe_events.py":
            (pdir / name).write_bytes(data)
    args = ["--speculative-algorithm", "EAGLE", "--exit-code", "3"]
    env = base_env()
    env.update(probe_env([v2_forward().as_target()], existing_pythonpath=env["PYTHONPATH"], probe_dir=pdir,
                         package="sglang_standin"))
    plain = run(standin_cmd(sys.executable, *args), base_env())
    probed = run(standin_cmd(sys.executable, *args), env)
    assert_same_behaviour(plain, probed)
    assert {e["where"] for e in probed.errors()} == {"events"}
    srv = Server(standin_cmd(sys.executable, "--serve-forever"), env)
    try:
        _wait_ready(srv)
        srv.signal(signal.SIGTERM)
        r = srv.finish()
    finally:
        srv.kill()
    assert r.returncode == -signal.SIGTERM


def test_probe_bad_config_is_reported_not_fatal():
    for raw in ("{not json", '{"v": 99}', '{"targets": [{"class": "X"}]}', '["x"]'):
        plain = run(standin_cmd(sys.executable, "--exit-code", "3"), base_env())
        env = base_env([PROBE_DIR])
        env["DYNSPEC_PROBE"] = raw
        probed = run(standin_cmd(sys.executable, "--exit-code", "3"), env)
        assert_same_behaviour(plain, probed)
        assert probed.errors() and {e["where"] for e in probed.errors()} == {"config"}, raw


# --------------------------------------------------------------------------------------------------
# sitecustomize chaining


def _chain_dir(tmp_path, body: str):
    d = tmp_path / "theirs"
    d.mkdir()
    (d / "sitecustomize.py").write_text(textwrap.dedent(body))
    return d


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_probe_chains_to_the_sitecustomize_it_shadows(python, tmp_path):
    theirs = _chain_dir(tmp_path, """
        import os
        os.environ["THEIRS_RAN"] = "yes"
        MARK = "their sitecustomize"
    """)
    code = "import os, sitecustomize; print(os.environ.get('THEIRS_RAN'), sitecustomize.MARK, sitecustomize.__file__)"
    expected = f"yes their sitecustomize {theirs / 'sitecustomize.py'}\n"
    for env in (base_env([theirs]), base_env([PROBE_DIR, theirs]), injected_env([], extra_paths=[theirs])):
        r = run([python, "-c", code], env)
        assert (r.returncode, r.stdout) == (0, expected), r.stderr
    probed = run([python, "-c", code], injected_env([], extra_paths=[theirs]))
    assert [rec["event"] for rec in probed.records] == ["start", "coverage"]


@pytest.mark.parametrize("python", [PY310, sys.executable, PY312], ids=py_id)
def test_probe_chained_sitecustomize_failure_reads_as_before(python, tmp_path):
    theirs = _chain_dir(tmp_path, """
        print("theirs starts")
        raise RuntimeError("their sitecustomize is broken")
    """)
    plain = run([python, "-c", "print('main ran')"], base_env([theirs]))
    probed = run([python, "-c", "print('main ran')"], injected_env([], extra_paths=[theirs]))
    assert "Error in sitecustomize" in plain.stderr and "their sitecustomize is broken" in plain.stderr
    assert_same_behaviour(plain, probed)
    assert [rec["event"] for rec in probed.records] == ["start", "coverage"]


# --------------------------------------------------------------------------------------------------
# coverage at shutdown and on request


def _serve(python, targets, *args, **options):
    env = injected_env(targets, **options)
    return Server(standin_cmd(python, "--speculative-algorithm", "EAGLE", "--speculative-disable-batch-threshold",
                              "4", "--serve-forever", *args), env)


def _wait_ready(srv):
    srv.wait_for(lambda err: "fired up and ready" in err)


@pytest.mark.parametrize("python", [PY310, PY312], ids=py_id)
def test_probe_sigterm_reports_coverage_and_still_kills(python):
    fwd = v2_forward()
    srv = _serve(python, [fwd.as_target()], "--tp-size", "2")
    try:
        _wait_ready(srv)
        srv.signal(signal.SIGTERM)
        r = srv.finish()
    finally:
        srv.kill()
    assert r.returncode == -signal.SIGTERM  # dies of the signal, as without the probe
    (launcher,) = r.with_role("launcher")
    assert [c["reason"] for c in launcher.events("coverage")] == ["sigterm"]
    # the schedulers see their parent go and exit normally: their atexit snapshot arrives
    for s in r.with_role("scheduler"):
        assert coverage_of(s, 0)["executed"] == fwd.runs


def test_probe_keeps_the_servers_own_sigterm_handler():
    plain = Server(standin_cmd(sys.executable, "--serve-forever", "--sigterm-handler"), base_env())
    probed = _serve(sys.executable, [v2_forward().as_target()], "--sigterm-handler")
    runs = []
    for srv in (plain, probed):
        try:
            _wait_ready(srv)
            srv.signal(signal.SIGTERM)
            runs.append(srv.finish())
        finally:
            srv.kill()
    plain_r, probed_r = runs
    assert plain_r.returncode == probed_r.returncode == 0
    assert "graceful shutdown" in probed_r.stdout
    (launcher,) = probed_r.with_role("launcher")
    assert [c["reason"] for c in launcher.events("coverage")] == ["exit"]


@pytest.mark.parametrize("python", [PY310, sys.executable, PY312], ids=py_id)
def test_probe_coverage_on_request_by_trigger_file_and_signal(python, tmp_path):
    fwd = v2_forward()
    trigger = tmp_path / "coverage-now"
    srv = _serve(python, [fwd.as_target()], "--tp-size", "2", trigger_file=str(trigger), trigger_poll=0.1,
                 signal="SIGUSR2")
    try:
        _wait_ready(srv)
        trigger.write_text("1")

        def triggered(_):
            return sum(1 for r in srv.records() if r["event"] == "coverage" and r["reason"] == "trigger") >= 2

        srv.wait_for(triggered, timeout=30)
        scheds = [r for r in srv.records() if r["event"] == "entry" and r["role"] == "scheduler"]
        os.kill(scheds[0]["pid"], signal.SIGUSR2)
        srv.wait_for(lambda _: any(r["event"] == "coverage" and r["reason"] == "signal" for r in srv.records()))
        srv.signal(signal.SIGTERM)
        r = srv.finish()
    finally:
        srv.kill()
    for s in r.with_role("scheduler"):
        c = coverage_of(s, 0, "trigger")
        assert c["executed"] == fwd.runs and c["calls"] == 5
    (sig,) = [c for c in r.records if c["event"] == "coverage" and c["reason"] == "signal"]
    assert sig["pid"] == scheds[0]["pid"] and sig["targets"][0]["executed"] == fwd.runs
    assert r.errors() == []


def test_probe_lines_stay_whole_under_concurrency():
    """8 TP ranks writing at the same time into one pipe: every line parses."""
    r = run(standin_cmd(sys.executable, "--tp-size", "8", "--speculative-algorithm", "EAGLE", "--steps", "3"),
            injected_env([v2_forward().as_target(), v2_init().as_target()]))
    assert r.returncode == 0
    assert_well_formed(r)
    assert sorted(s.rank["tp"] for s in r.with_role("scheduler")) == list(range(8))
    assert all(s.events("worker") for s in r.with_role("scheduler"))


def test_probe_fork_child_announces_itself():
    code = textwrap.dedent("""
        import os, sys
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    r = run([sys.executable, "-c", code], injected_env([]))
    assert r.returncode == 0
    starts = [rec for rec in r.records if rec["event"] == "start"]
    assert len(starts) == 2 and starts[1]["started_as"] == "fork" and starts[1]["forked_from"] == starts[0]["pid"]


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_probe_core_is_light(python):
    """The core loads no heavy stdlib module and leaves the instrumentation unloaded in a process that
    imports nothing patched; its own set-up time gets a sanity bound (wall clock on a shared box: the
    <= 20 ms start-up target is measured against `python -c pass` by benchmarks/probe_overhead.py)."""
    code = ("import sys; print(sorted(m for m in ('re', 'json', 'enum', 'threading', 'ast', 'hashlib', "
            "'_dynspec_probe_code') if m in sys.modules))")
    plain = run([python, "-c", code], base_env())
    probed = run([python, "-c", code], injected_env([v2_forward().as_target()]))
    assert probed.stdout == plain.stdout
    (start,) = [rec for rec in probed.records if rec["event"] == "start"]
    assert start["setup_ms"] < 50


def test_probe_long_records_are_shrunk_to_one_atomic_line():
    """A record above the line limit (here: a start line with 16 long arguments) is cut down, says what
    was cut, and stays one parseable line under PIPE_BUF."""
    r = run([sys.executable, "-c", "pass", *(["x" * 400] * 16)], injected_env([v2_forward().as_target()]))
    assert r.returncode == 0
    assert_well_formed(r)
    (start,) = [rec for rec in r.records if rec["event"] == "start"]
    assert "argv" in start["truncated"] and start["python"] and start["pid"]

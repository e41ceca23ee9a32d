"""The probe reports, per process and rank, that the plugin was loaded (its module imported there)
and that its hook executed (a hit of the hook function), and verify judges it: a real process tree
(the stand-in server, whose schedulers call load_plugins() first as sglang 0.5.11+ does), a real
plugin wheel installed by pip, the real probe."""
import json
import subprocess
import sys

from tests.inject.standin_pkg.harness import injected_env, run, standin_cmd
from tests.support import plugins as P

PLUGIN = '''import sys


def _hook(result, self, *args, **kwargs):
    sys.stderr.write("DSD plugin active: threshold=%s\\n" % self.threshold)


def register():
    from sglang_standin.srt.plugins import register as reg

    reg("sglang_standin.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__", _hook, "after")
'''
FEATURE = '''name = "dsd-plugin"
title = "stand-in plugin"
[marker]
pattern = 'DSD plugin active: threshold=(?P<threshold>\\d+)'
literal = "DSD plugin active"
[plugin]
entry_point = "dsd"
target = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"
hook = "after"
'''


def serve_and_verify(tmp_path, **env_updates):
    site = tmp_path / "plugin-site"
    whl = P.build_wheel(tmp_path / "w", "dsd-plugin", "0.2", {"dsd_plugin/__init__.py": PLUGIN},
                        {"sglang.srt.plugins": {"dsd": "dsd_plugin:register"}})
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    "--disable-pip-version-check", str(whl)], check=True, capture_output=True)
    # the probe target is the hook function, line 5 (its write), as preflight names it
    env = injected_env([{"file": str(site / "dsd_plugin" / "__init__.py"), "function": "_hook", "lines": [5]}],
                       extra_paths=[site])
    env.update(env_updates)
    r = run(standin_cmd(sys.executable, "--tp-size", "2", "--speculative-algorithm", "EAGLE",
                        "--speculative-disable-batch-threshold", "4", "--steps", "2"), env)
    assert r.returncode == 0, r.stderr[-2000:]
    (tmp_path / "server.log").write_text(r.stderr)
    (tmp_path / "f.toml").write_text(FEATURE)
    v = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", "--feature", str(tmp_path / "f.toml"),
                        str(tmp_path / "server.log")], capture_output=True, text=True, timeout=60)
    doc = json.loads(v.stdout)
    assert v.returncode == doc["exit_code"]
    return r.stderr, doc


def test_plugin_loaded_and_its_hook_executed_on_every_scheduler_rank_is_live(tmp_path):
    log, doc = serve_and_verify(tmp_path)
    assert log.count("DSD plugin active: threshold=4") == 2  # one per TP rank
    ranks = [x for x in doc["probe"]["ranks"] if x["role"] == "scheduler"]
    assert len(ranks) == 2 and {r["rank"]["tp"] for r in ranks} == {0, 1}
    assert all(r["loaded"] and r["hits"] >= 1 and r["worker"].endswith("EAGLEWorkerV2") for r in ranks)
    assert doc["probe"]["proven"] and doc["verdict"] == "live" and doc["exit_code"] == 0


def test_plugin_filtered_out_in_the_schedulers_is_dead_naming_each_rank(tmp_path):
    log, doc = serve_and_verify(tmp_path, SGLANG_PLUGINS="other_plugin")
    assert "DSD plugin active" not in log
    ranks = [x for x in doc["probe"]["ranks"] if x["role"] == "scheduler"]
    assert len(ranks) == 2 and not any(r["loaded"] or r["hits"] for r in ranks)
    (f,) = [f for f in doc["findings"] if f["code"] == "DS315"]
    pids = sorted(r["pid"] for r in ranks)
    assert f["message"].startswith("plugin 'dsd' not loaded in pid ")
    assert all(f"pid {p} rank" in f["message"] for p in pids)
    assert doc["verdict"] == "dead" and doc["exit_code"] == 1

"""dynspec_cli.engines.sglang.probe_setup: the environment that injects the probe, the shell one-liner (run by a real
shell), the line parser, and the probe folder's promise to import nothing outside the stdlib."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from dynspec_cli.engines.sglang import probe_setup as ps
from dynspec_cli.evidence.observation import PROBE_PREFIX
from tests.inject.standin_pkg.harness import STANDIN_DIR, base_env, v2_forward

PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
TARGET = {"file": "sglang/srt/speculative/eagle_worker_v2.py", "class": "EAGLEWorkerV2",
          "function": "forward_batch_generation", "lines": [640, 638, 639]}


def test_probe_env_puts_the_probe_first_and_never_an_empty_entry():
    env = ps.probe_env([TARGET], existing_pythonpath="/a:/b")
    assert env["PYTHONPATH"] == f"{ps.PROBE_DIR}:/a:/b"
    for existing in (None, ""):
        assert ps.probe_env([TARGET], existing_pythonpath=existing)["PYTHONPATH"] == str(ps.PROBE_DIR)
    again = ps.probe_env([TARGET], existing_pythonpath=env["PYTHONPATH"])["PYTHONPATH"]
    assert again == env["PYTHONPATH"]  # not twice
    remote = ps.probe_env([TARGET], existing_pythonpath=None, probe_dir="/opt/dynspec/probe")
    assert remote["PYTHONPATH"] == "/opt/dynspec/probe"
    cfg = json.loads(env[ps.ENV_VAR])
    assert cfg == {"v": 2, "targets": [{**TARGET, "lines": [638, 639, 640]}]}
    assert set(env) == {"PYTHONPATH", "DYNSPEC_PROBE"}


def test_probe_config_options_and_validation():
    cfg = ps.probe_config([TARGET], count_limit=50, trigger_file="/tmp/t", signal="SIGUSR2", sigterm="all",
                          line_hits=False, package=None)
    assert cfg["count_limit"] == 50 and cfg["signal"] == "SIGUSR2" and "package" not in cfg
    lines_only = ps.probe_config([{"file": "/abs/x.py", "lines": [3]}])["targets"][0]
    assert lines_only == {"file": "/abs/x.py", "lines": [3]}
    bad = [
        ({"file": "x.txt", "function": "f"}, "'file'"),
        ({"file": "x.py", "function": "f", "lines": "12"}, "'lines'"),
        ({"file": "x.py", "function": "f", "lines": [0]}, "'lines'"),
        ({"file": "x.py", "class": ""}, "'class'"),
        ({"file": "x.py"}, "function or patch lines"),
    ]
    for target, msg in bad:
        with pytest.raises(ValueError, match=msg):
            ps.probe_config([target])
    with pytest.raises(ValueError, match="unknown probe option"):
        ps.probe_config([TARGET], colour="red")
    with pytest.raises(ValueError, match="count_limit"):
        ps.probe_config([TARGET], count_limit=True)


@pytest.mark.parametrize("pythonpath", [None, "", "/somewhere/else"])
def test_one_liner_runs_in_a_real_shell(pythonpath, tmp_path):
    """The printed line, pasted into sh, injects the probe into a server started by hand."""
    line = ps.one_liner([v2_forward().as_target()], package="sglang_standin", command=[
        sys.executable, "-c", "import os, sys; print(os.environ['PYTHONPATH']); print('ready')"])
    assert line.startswith(f"PYTHONPATH={ps.PROBE_DIR}${{PYTHONPATH:+:$PYTHONPATH}} DYNSPEC_PROBE='{{")
    env = base_env()
    env.pop("PYTHONPATH")
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(["sh", "-c", line], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    expected = str(ps.PROBE_DIR) + (f":{pythonpath}" if pythonpath else "")
    assert out.stdout == f"{expected}\nready\n"
    recs = [ps.parse_probe_line(ln) for ln in out.stderr.splitlines()]
    assert [r["event"] for r in recs] == ["start", "coverage"] and recs[0]["targets"] == 1


def test_one_liner_default_command_and_quoting():
    line = ps.one_liner([{**TARGET, "class": "It's"}])
    assert line.endswith(" python -m sglang.launch_server ...")
    # the config survives the shell's quoting (a quote inside the JSON)
    show = f"{sys.executable} -c 'import os; print(os.environ[\"DYNSPEC_PROBE\"])'"
    out = subprocess.run(["sh", "-c", line.replace("python -m sglang.launch_server ...", show)],
                         capture_output=True, text=True, timeout=30, env=base_env())
    assert json.loads(out.stdout)["targets"][0]["class"] == "It's"


def test_parse_probe_line():
    rec = {"v": 1, "event": "hit", "pid": 7, "target": 0}
    raw = "DYNSPEC-PROBE " + json.dumps(rec)
    assert ps.PREFIX == PROBE_PREFIX  # the evidence rules recognise exactly these lines
    assert ps.parse_probe_line(raw) == rec
    assert ps.parse_probe_line(raw + "\n") == rec
    assert ps.parse_probe_line("[host-1] " + raw + "\r\n") == rec
    for text in ("", "DYNSPEC-PROBE", "DYNSPEC-PROBE {", "DYNSPEC-PROBE [1]", 'DYNSPEC-PROBE {"v":"1","event":"x"}',
                 'DYNSPEC-PROBE {"v":1}', "[2026-01-01] Decode batch", None, b"DYNSPEC-PROBE {}"):
        assert ps.parse_probe_line(text) is None, text


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split(".")[0]


def test_probe_folder_is_stdlib_only_and_matches_probe_files():
    files = ps.probe_files()
    assert set(files) == {"sitecustomize.py", "_dynspec_probe.py", "_dynspec_probe_events.py", "_dynspec_probe_code.py"}
    assert sorted(p.name for p in ps.PROBE_DIR.glob("*.py")) == sorted(files)
    stdlib = set(sys.stdlib_module_names)
    for name in files:
        mods = set(_imports(ps.PROBE_DIR / name)) - {"_dynspec_probe", "_dynspec_probe_events", "_dynspec_probe_code"}
        assert mods <= stdlib, (name, mods - stdlib)
        assert "dynspec_cli" not in files[name].decode()


def test_precompiled_probe_is_loaded_from_bytecode_even_when_writing_it_is_off(tmp_path):
    """The copy a remote host gets, compiled with the server's interpreter: processes that may not write
    bytecode (PYTHONDONTWRITEBYTECODE=1) still read it."""
    import shutil

    py = "/root/.pyenv/versions/3.10.13/bin/python3.10"
    pdir = tmp_path / "probe"
    pdir.mkdir()
    for name, data in ps.probe_files().items():
        (pdir / name).write_bytes(data)
    env = base_env()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    subprocess.run(ps.precompile_command(py, pdir), env=env, check=True, timeout=120)
    cached = sorted(p.name for p in (pdir / "__pycache__").iterdir())
    assert cached == sorted(n.replace(".py", ".cpython-310.pyc") for n in ps.PROBE_FILES)
    env.update(ps.probe_env([TARGET], existing_pythonpath=None, probe_dir=pdir))
    out = subprocess.run([py, "-c", "import _dynspec_probe as p; print(p.__spec__.cached, p.__spec__.loader_state)"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "__pycache__" in out.stdout, out.stderr
    shutil.rmtree(pdir / "__pycache__")
    subprocess.run([py, "-c", "pass"], env=env, check=True, capture_output=True, timeout=60)
    assert not (pdir / "__pycache__").exists()  # without it, nothing is written behind the user's back


def test_readme_documents_every_event_and_option():
    readme = (ps.PROBE_DIR / "README.md").read_text()
    for event in ps.EVENTS:
        assert f"`{event}`" in readme, event
    for option in ps._OPTIONS:
        assert f"`{option}`" in readme, option
    for role in ps.ROLES:
        assert f"`{role}`" in readme, role


@pytest.mark.skipif(not os.path.exists(PY38), reason="no Python 3.8 here")
def test_probe_runs_under_python_3_8():
    """The probe promises 3.8+ (no sys.orig_argv, no co_lines there): the stand-in still reports."""
    fwd = v2_forward()
    env = base_env()
    env.update(ps.probe_env([fwd.as_target()], existing_pythonpath=env["PYTHONPATH"], package="sglang_standin"))
    out = subprocess.run([PY38, "-m", "sglang_standin.launch_server", "--speculative-algorithm", "EAGLE",
                          "--speculative-disable-batch-threshold", "4"], env=env, capture_output=True, text=True,
                         timeout=120, cwd=STANDIN_DIR)
    assert out.returncode == 0, out.stderr
    recs = [r for r in map(ps.parse_probe_line, out.stderr.splitlines()) if r]
    assert not [r for r in recs if r["event"] == "error"]
    assert {r["role"] for r in recs if r["event"] == "server_args"} >= {"launcher", "scheduler"}
    (cov,) = [r for r in recs if r["event"] == "coverage" and r["role"] == "scheduler"]
    assert cov["targets"][0]["executed"] == fwd.runs and cov["targets"][0]["mode"] == "code"


def test_launch_probes_every_running_hunk_of_the_judged_diff():
    """preflight's `hunks` entries (engines/sglang/hunks.py) become probe targets: behaviour and marker hunks
    (module-relative, so they resolve in the server's own sglang), never comments, flags or a plugin's files."""
    hunks = [
        {"file": "python/sglang/srt/speculative/eagle_worker_v2.py", "installed": "/site/sglang/srt/speculative/eagle_worker_v2.py",
         "class": "EAGLEWorkerV2", "function": "__init__", "lines": [120], "role": "marker"},
        {"file": "python/sglang/srt/speculative/eagle_worker_v2.py", "installed": None,
         "class": "EagleDraftWorker", "function": "draft", "lines": [300, 301], "role": "behaviour"},
        {"file": "python/sglang/srt/speculative/eagle_worker_v2.py", "class": "X", "function": "f", "lines": [5], "role": "comment"},
        {"file": "python/sglang/srt/server_args.py", "class": "ServerArgs", "function": "add_cli_args", "lines": [9], "role": "flag"},
        {"file": "my_plugin/hook.py", "class": None, "function": "hook", "lines": [3], "role": "plugin"},
    ]
    got = ps.probe_targets(None, {"hunks": hunks, "patched": [{"file": "ignored.py"}]}, None)
    assert got == [
        {"file": "sglang/srt/speculative/eagle_worker_v2.py", "class": "EAGLEWorkerV2", "function": "__init__",
         "lines": [120], "hunk": 0, "role": "marker"},
        {"file": "sglang/srt/speculative/eagle_worker_v2.py", "class": "EagleDraftWorker", "function": "draft",
         "lines": [300, 301], "hunk": 1, "role": "behaviour"},
    ]
    cfg = ps.probe_config(got)
    assert cfg["v"] == 2 and [t["hunk"] for t in cfg["targets"]] == [0, 1]
    with pytest.raises(ValueError, match="'role'"):
        ps.probe_config([{**got[0], "role": "comment"}])

"""Preflight judges the environment the server will really get: locally the shell's (dynspec's own
environment, which a local server inherits) with --env applied, over SSH the host's login
environment; it says which one it used, and its fix, done literally, flips the verdict.

Real sglang 0.5.9 wheel: there EAGLE3 runs EAGLEWorkerV2 only with SGLANG_ENABLE_SPEC_V2 true
(sglang/srt/server_args.py: `envs.SGLANG_ENABLE_SPEC_V2.get()` decides disable_overlap_schedule,
and scheduler.py picks EAGLEWorkerV2 only with overlap on); the patch is in EAGLEWorkerV2."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.support.sshd import ssh_lab  # noqa: F401 - fixture

pytestmark = pytest.mark.wheels

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
FLAGS = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
         "--speculative-eagle-topk", "1", "--speculative-disable-batch-threshold", "5"]
V2 = "SGLANG_ENABLE_SPEC_V2"


def shell_env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if k != V2}
    env.update(kw)
    return env


def preflight(args: list, env: dict, *, shell_prefix: str = "") -> subprocess.CompletedProcess:
    """`dynspec preflight ARGS -- FLAGS` run by bash, after `shell_prefix` (e.g. `export X=1;`)."""
    line = shell_prefix + " ".join(map(shlex.quote, DYNSPEC + ["preflight", *args, "--", *FLAGS]))
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, env=env)


def fix_steps(out: str) -> list:
    """The steps of DS201's printed fix: `fix: To run X on sglang V: STEP; STEP. Or port ...`"""
    m = re.search(r"fix: To run EAGLEWorkerV2 on sglang 0\.5\.9: (.*?)\. Or port", out)
    assert m, out
    return m.group(1).split("; ")


def apply(steps: list, args: list) -> tuple:
    """Each step done literally: `export ...` in the shell before dynspec, `pass --env K=V` as that
    option of dynspec, `pass --flag V` as a server flag already there (the flags hold topk 1)."""
    prefix, args = "", list(args)
    for s in steps:
        if s.startswith("export "):
            prefix += s + "; "
        elif s.startswith("pass --env "):
            args += ["--env", s.split()[-1]]
        else:
            assert s == "pass --speculative-eagle-topk 1", s
    return prefix, args


def test_an_exported_switch_reaches_the_local_judgement(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    dead = preflight(["--python", py], shell_env())
    assert dead.returncode == 1 and "DS201" in dead.stdout, dead.stdout + dead.stderr
    assert f"this shell's environment · {V2} unset" in dead.stdout
    steps = fix_steps(dead.stdout)
    assert f"export {V2}=True" in steps
    prefix, args = apply(steps, ["--python", py])
    fixed = preflight(args, shell_env(), shell_prefix=prefix)
    assert fixed.returncode == 0 and "PREFLIGHT REACHABLE" in fixed.stdout, fixed.stdout
    assert f"{V2}=True (from this shell's environment)" in fixed.stdout
    # the same with the variable in dynspec's environment from the start, as JSON
    doc = json.loads(preflight(["--python", py, "--json"], shell_env(**{V2: "True"})).stdout)
    assert doc["verdict"] == "reachable" and doc["worker"]["class"] == "EAGLEWorkerV2"
    assert doc["environment"] == {"base": "this shell's environment", "overrides": [],
                                  "vars": {V2: {"value": "True", "from": "this shell's environment"}}}


def test_an_env_option_outranks_the_shell_and_the_fix_says_so(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    args = ["--python", py, "--env", f"{V2}=False"]
    dead = preflight(args, shell_env(**{V2: "True"}))  # the server gets --env's False: export cannot help
    assert dead.returncode == 1, dead.stdout
    assert f"this shell's environment + --env/[env] · {V2}=False (from --env/[env])" in dead.stdout
    steps = fix_steps(dead.stdout)
    assert f"pass --env {V2}=True" in steps and not any(s.startswith("export") for s in steps)
    prefix, args = apply(steps, args)
    fixed = preflight(args, shell_env(**{V2: "True"}), shell_prefix=prefix)
    assert fixed.returncode == 0, fixed.stdout


@pytest.mark.ssh
def test_over_ssh_the_login_environment_is_judged(sglang_python, ssh_lab):
    py, _, _ = sglang_python("0.5.9")
    files = ["--ssh-config", str(ssh_lab.ssh_config), "--known-hosts", str(ssh_lab.known_hosts)]
    # the host's login environment has the switch on (sshd SetEnv); this shell has not
    ssh_lab.add_server("v2host", session_env={V2: "1"})
    try:
        r = preflight(["--host", "v2host", *files, "--python", py, "--json"], shell_env())
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "reachable", r.stdout + r.stderr
        assert doc["environment"]["vars"] == {V2: {"value": "1", "from": "the login environment on v2host"}}
    finally:
        ssh_lab.remove_server("v2host")
    # dut's login environment has no switch: exporting it here does not reach the host, --env does
    args = ["--host", "dut", *files, "--python", py]
    dead = preflight(args, shell_env(**{V2: "True"}))
    assert dead.returncode == 1, dead.stdout + dead.stderr
    assert f"the login environment on dut · {V2} unset" in dead.stdout
    steps = fix_steps(dead.stdout)
    assert f"pass --env {V2}=True" in steps and not any(s.startswith("export") for s in steps)
    prefix, args = apply(steps, args)
    fixed = preflight(args, shell_env(), shell_prefix=prefix)
    assert fixed.returncode == 0 and "PREFLIGHT REACHABLE" in fixed.stdout, fixed.stdout

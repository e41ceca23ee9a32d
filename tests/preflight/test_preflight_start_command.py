"""preflight's "start it yourself" command, pasted into `sh -c`, starts exactly the judged server:
same argv, the profile's [env] and --env, the probe, on the host named; no secret value in the text.
The "python" is a wrapper that hands the inspector to the real sglang python and, for the server
start, only records its argv and environment."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sshd import ssh_lab  # noqa: F401 - fixture

pytestmark = pytest.mark.wheels

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
HF, API, PW = "hf_profilesecret123", "sk-flagsecret-9", "pw-clisecret-7"
PROBE = Path(__file__).resolve().parents[2] / "dynspec_cli" / "engines" / "sglang" / "probe"


def fake_python(tmp: Path, real: str) -> Path:
    path = tmp / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text(f"""#!/bin/sh
case "$1" in -c|-) exec {real} "$@";; esac
printf '%s\\0' "$0" "$@" > "$DUMP_DIR/argv"
env -0 > "$DUMP_DIR/env"
""")
    path.chmod(0o755)
    return path


def profile(tmp: Path, python: Path) -> Path:
    p = tmp / "srv.toml"
    p.write_text(f"""name = "srv"
host = "local"
python = "{python}"
port = 30123
[env]
SGLANG_ENABLE_SPEC_V2 = "True"
HF_TOKEN = "{HF}"
[flags]
model-path = "/models/m"
api-key = "{API}"
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "/models/d"
speculative-eagle-topk = 1
speculative-disable-batch-threshold = 5
max-running-requests = 64
""")
    return p


def expected_argv(python: Path) -> list:
    # the profile's [flags] in order, then --port (the profile's port), as `dynspec launch` starts it
    return [str(python), "-m", "sglang.launch_server", "--model-path", "/models/m", "--api-key", API,
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/d",
            "--speculative-eagle-topk", "1", "--speculative-disable-batch-threshold", "5",
            "--max-running-requests", "64", "--port", "30123"]


def paste(line: str, tmp: Path, home: Path) -> tuple[list, dict]:
    dump = tmp / "dump"
    dump.mkdir(exist_ok=True)
    shell_env = {"PATH": os.environ["PATH"], "HOME": str(home), "DUMP_DIR": str(dump),
                 "HF_TOKEN": HF, "OPENAI_API_KEY": API, "DB_PASSWORD": PW}
    r = subprocess.run(["sh", "-c", line], env=shell_env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    argv = (dump / "argv").read_bytes().decode().split("\0")[:-1]
    env = dict(e.split("=", 1) for e in (dump / "env").read_bytes().decode().split("\0")[:-1])
    return argv, env


def run_preflight(prof: Path, *extra: str, json_out: bool = True):
    cmd = DYNSPEC + ["preflight", str(prof), *extra, f"--env=DB_PASSWORD={PW}"] + (["--json"] if json_out else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    for secret in (HF, API, PW):
        assert secret not in r.stdout and secret not in r.stderr
    return r


def check_server(argv, env, python, probe_dir: Path, doc):
    assert argv == expected_argv(python)
    assert env["SGLANG_ENABLE_SPEC_V2"] == "True" and env["HF_TOKEN"] == HF and env["DB_PASSWORD"] == PW
    assert env["PYTHONPATH"].split(":")[0] == str(probe_dir) and (probe_dir / "sitecustomize.py").is_file()
    targets = json.loads(env["DYNSPEC_PROBE"])["targets"]
    assert [(t["file"], t["class"]) for t in targets] == [(p["file"], p["class"]) for p in doc["patched"]]


def test_pasted_command_starts_the_judged_server(sglang_python, tmp_path):
    real, _, _ = sglang_python("0.5.9")
    py = fake_python(tmp_path, real)
    prof = profile(tmp_path, py)
    doc = json.loads(run_preflight(prof).stdout)
    assert doc["verdict"] == "reachable", doc["findings"]
    assert sorted(doc["probe_command_needs"]) == ["DB_PASSWORD", "HF_TOKEN", "OPENAI_API_KEY"]
    argv, env = paste(doc["probe_command"], tmp_path, tmp_path)
    check_server(argv, env, py, PROBE, doc)
    text = run_preflight(prof, json_out=False).stdout
    assert doc["probe_command"] in text and "OPENAI_API_KEY" in text


@pytest.mark.ssh
def test_for_a_remote_host_the_command_uses_the_hosts_probe_folder(sglang_python, tmp_path, ssh_lab):
    real, _, _ = sglang_python("0.5.9")
    py = fake_python(tmp_path, real)
    prof = profile(tmp_path, py)
    r = run_preflight(prof, "--host", "dut", "--ssh-config", str(ssh_lab.ssh_config),
                      "--known-hosts", str(ssh_lab.known_hosts))
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "reachable", doc["findings"]
    line = doc["probe_command"]
    assert str(PROBE) not in line  # this machine's path means nothing on the host
    # the versioned folder `dynspec launch` copies to the host: sha256 of the probe's files, 12 hex
    names = ("_dynspec_probe.py", "_dynspec_probe_code.py", "_dynspec_probe_events.py", "sitecustomize.py")
    digest = hashlib.sha256(b"".join((PROBE / n).read_bytes() for n in names)).hexdigest()[:12]
    assert doc["probe_dir"] == f"~/.dynspec/probe/{digest}"
    assert "ssh -F" in doc["probe_copy"] and f".dynspec/probe/{digest}" in doc["probe_copy"]
    # the host's shell, with the folder where launch puts it (a throwaway HOME, never the real one)
    home = tmp_path / "home"
    dest = home / ".dynspec" / "probe" / digest
    dest.mkdir(parents=True)
    for n in names:
        shutil.copy(PROBE / n, dest / n)
    argv, env = paste(line, tmp_path, home)
    check_server(argv, env, py, dest, doc)

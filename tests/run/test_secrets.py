"""Secrets stay off command lines and out of what dynspec writes into the server log (issue 22,
item 15): a real launch, locally and over the real test sshd, watched two ways: every command
line sampled from /proc every ~1 ms, as any local user could, and every execve seen by strace."""
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import DYNSPEC, cleanup, dynspec, record, write_profile
from tests.support.procs import CmdlineSampler, ExecTrace

HF = "hf_PROFILEsecret4711"
TOKEN = "tok_CLIsecret0815"
API_KEY = "sk-APIsecret9999"


def octal(secret: str) -> str:
    """How the SSH envelope spells a script's bytes: \\NNN each."""
    return "".join("\\%03o" % b for b in secret.encode())


@pytest.fixture
def name():
    n = f"t-{uuid.uuid4().hex[:8]}"
    yield n
    cleanup(n)


@pytest.mark.parametrize("where", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_env_secrets_reach_no_command_line_and_the_api_key_no_dynspec_line(tmp_path, name, where, request):
    ssh_lab = request.getfixturevalue("ssh_lab") if where == "ssh" else None
    srv = ssh_lab.add_server("private") if ssh_lab else None
    try:
        prof = write_profile(tmp_path / "p.toml", name, host="private" if srv else "local",
                             env={"SGLANG_ENABLE_SPEC_V2": "True", "HF_TOKEN": HF},
                             flags={"api-key": API_KEY})
        text = prof.read_text().replace(f'"api-key" = "{API_KEY}"\n', "")  # first: the probe logs 16 words
        prof.write_text(text.replace("[flags]\n", f'[flags]\n"api-key" = "{API_KEY}"\n'))
        # `--env NAME`: the value comes from dynspec's own environment, not its command line
        args = ["launch", str(prof), "--no-preflight", "--json", "--env", "OTHER_TOKEN"]
        if srv:
            args += ["--ssh-config", str(ssh_lab.ssh_config), "--known-hosts", str(ssh_lab.known_hosts)]
        # dynspec waits for a line on stdin, so strace is attached before its first exec
        proc = subprocess.Popen(["sh", "-c", 'read go && exec "$@"', "sh", *DYNSPEC, *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "OTHER_TOKEN": TOKEN})
        needles = [s.encode() for s in (HF, TOKEN)] + [octal(s).encode() for s in (HF, TOKEN)]
        with CmdlineSampler(needles) as sampler, ExecTrace(srv.proc.pid if srv else proc.pid,
                                                           tmp_path / "execs.txt") as trace:
            out, err = proc.communicate("go\n", timeout=180)
            assert proc.returncode == 0, err[-2000:]
            assert json.loads(out)["verdict"] == "live"
            pid = record(name)["pid"]
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            stop = dynspec("stop", name, *(["--host", "private"] if srv else []), ssh=ssh_lab)
            assert stop.returncode == 0, stop.stderr
        assert f"HF_TOKEN={HF}".encode() in environ and f"OTHER_TOKEN={TOKEN}".encode() in environ  # delivered
        assert sampler.sweeps > 200  # ~1 ms apart over a launch of seconds
        assert sampler.seen == []
        execs = trace.execs()
        assert any("fake_sglang_server" in e for e in execs)  # the trace saw the server start
        for secret in (HF, TOKEN):
            leaks = [e for e in execs if secret in e or octal(secret).replace("\\", "\\\\") in e]
            assert leaks == []
        log = Path(record(name)["log"]).read_text()
        ours = [ln for ln in log.splitlines() if ln.startswith("DYNSPEC")]
        starts = [json.loads(ln.split(" ", 1)[1]) for ln in ours if ln.startswith("DYNSPEC-PROBE ") and
                  '"event":"start"' in ln.replace(" ", "")]
        assert starts and any(s["argv"][s["argv"].index("--api-key") + 1] == "***" for s in starts
                              if "--api-key" in s["argv"])
        assert [ln for ln in ours if API_KEY in ln or HF in ln or TOKEN in ln] == []
    finally:
        if srv:
            ssh_lab.remove_server("private")

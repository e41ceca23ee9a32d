"""What preflight sends to the target python travels on stdin, never on a command line: secrets in
`--env` stay out of every process list (this machine's and, over a real sshd, the host's), and a
large `--patch` diff is not limited by the size of an SSH command."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.procs import pids_with
from tests.support.sshd import ssh_lab  # noqa: F401 - fixture

pytestmark = pytest.mark.wheels

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
FLAGS = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
         "--speculative-eagle-topk", "4", "--speculative-disable-batch-threshold", "5"]
SECRET = "hf_s3cretvalue-4711"


def octal(text: str) -> str:
    """How shell.envelope spells a script in an SSH command line."""
    return "".join(f"\\{b:03o}" for b in text.encode())


class CmdlineWatch:
    """Polls /proc/*/cmdline for `needles` while the body runs; every sighting is kept as
    (pid, argv). pids_with (tests/support/procs.py) finds them; the argv is read again to keep it."""

    def __init__(self, *needles: str):
        self.needles, self.seen, self.sweeps = needles, [], 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for n in self.needles:
                for pid in pids_with(n):
                    try:
                        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
                    except OSError:
                        continue
                    if not argv:  # exited between the two reads: an exiting process shows no cmdline
                        continue
                    self.seen.append((pid, [a.decode(errors="replace") for a in argv]))
            self.sweeps += 1

    def pids(self, *, besides: list = ()) -> list:
        """Pids seen, without those whose argv was `besides`: dynspec itself, and a child it forked
        that has not exec'ed yet (Linux shows the parent's argv until then)."""
        return sorted({pid for pid, argv in self.seen if argv != list(besides)})

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def remote(lab) -> list:
    return ["--host", "dut", "--ssh-config", str(lab.ssh_config), "--known-hosts", str(lab.known_hosts)]


@pytest.mark.parametrize("where", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_env_values_are_on_no_command_line(sglang_python, where, request):
    py, _, _ = sglang_python("0.5.9")
    target = remote(request.getfixturevalue("ssh_lab")) if where == "ssh" else []
    cmd = DYNSPEC + ["preflight", *target, "--python", py, "--json", f"--env=HF_TOKEN={SECRET}",
                     "--env=DB_PASSWORD=pw-0815-x", "--env=SGLANG_ENABLE_SPEC_V2=True", "--"] + FLAGS
    with CmdlineWatch(SECRET, "pw-0815-x", octal(SECRET)) as watch:
        # dynspec's own argv holds what the user typed; every process it starts must not
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=120)
    doc = json.loads(out)
    # the env reached the inspector: with the switch on, 0.5.9 picks V2 and topk 4 is a start-up error
    assert doc["worker"]["class"] == "EAGLEWorkerV2" and "DS107" in [f["code"] for f in doc["findings"]], doc
    assert watch.sweeps > 5
    seen = watch.pids(besides=cmd)
    assert seen == [], f"secret on a command line: {[a for a in watch.seen if a[0] in seen][:3]}"
    assert SECRET not in out + err and "pw-0815-x" not in out + err


@pytest.mark.ssh
def test_env_by_name_keeps_the_value_off_dynspecs_own_command_line(sglang_python, ssh_lab):
    """`--env NAME` takes the value from dynspec's environment: over SSH it still reaches the host."""
    py, _, _ = sglang_python("0.5.9")
    cmd = DYNSPEC + ["preflight", *remote(ssh_lab), "--python", py, "--json", "--env", "HF_TOKEN",
                     "--env", "SGLANG_ENABLE_SPEC_V2", "--"] + FLAGS
    env = dict(os.environ, HF_TOKEN=SECRET, SGLANG_ENABLE_SPEC_V2="True")
    with CmdlineWatch(SECRET, octal(SECRET)) as watch:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    doc = json.loads(r.stdout)
    assert doc["worker"]["class"] == "EAGLEWorkerV2", doc  # the switch's value reached the remote inspector
    assert watch.sweeps > 5 and watch.seen == [], watch.seen[:3]
    r = subprocess.run(DYNSPEC + ["preflight", "--env", "NOT_SET_ANYWHERE_42", "--", *FLAGS], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "NOT_SET_ANYWHERE_42 is not set" in r.stderr


@pytest.mark.ssh
def test_a_100kb_patch_works_over_ssh(sglang_python, ssh_lab, tmp_path):
    py, site, rec = sglang_python("0.5.9")
    # a real diff of the patched worker (marker line) and enough unrelated hunks to pass 100 KB
    worker = "python/sglang/srt/speculative/eagle_worker_v2.py"
    lines = (site / "sglang/srt/speculative/eagle_worker_v2.py").read_text().splitlines()
    m = next(i for i in rec.insertions if i.what == "marker").line
    hunk = [f"--- a/{worker}", f"+++ b/{worker}", f"@@ -{m - 1},1 +{m - 1},2 @@", " " + lines[m - 2], "+" + lines[m - 1]]
    big = ["--- /dev/null", "+++ b/python/sglang/srt/dynspec_notes.py", "@@ -0,0 +1,2000 @@"]
    big += [f"+# note {i:05d}: {'x' * 40}" for i in range(2000)]
    (site / "sglang/srt/dynspec_notes.py").write_text("".join(b[1:] + "\n" for b in big[3:]))  # the diff is applied
    patch = tmp_path / "big.diff"
    patch.write_text("\n".join(hunk + big) + "\n")
    assert patch.stat().st_size > 100_000
    r = subprocess.run(DYNSPEC + ["preflight", *remote(ssh_lab), "--python", py, "--patch", str(patch), "--json",
                                  "--"] + FLAGS, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr  # dead: 0.5.9 runs EAGLEWorker here, the patch is in V2
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "dead" and doc["patched"] and doc["patched"][0]["class"] == "EAGLEWorkerV2"
    assert "DS201" in [f["code"] for f in doc["findings"]] and "DS210" not in [f["code"] for f in doc["findings"]]


def test_a_patch_from_a_pipe_or_standard_input_is_the_file_read(sglang_python, tmp_path):
    """`--patch <(git diff)`, `--patch -`, `/dev/stdin` and the file itself give one result: the patched
    line of the worker, from the diff's hunk."""
    py, site, rec = sglang_python("0.5.9")
    worker = "python/sglang/srt/speculative/eagle_worker_v2.py"
    lines = (site / "sglang/srt/speculative/eagle_worker_v2.py").read_text().splitlines()
    m = next(i for i in rec.insertions if i.what == "marker").line
    patch = tmp_path / "marker.diff"
    patch.write_text("\n".join([f"--- a/{worker}", f"+++ b/{worker}", f"@@ -{m - 1},1 +{m - 1},2 @@",
                                " " + lines[m - 2], "+" + lines[m - 1]]) + "\n")
    base = " ".join(DYNSPEC + ["preflight", "--python", py, "--json"])
    docs = []
    for how in (f"--patch {patch}", f"--patch <(cat {patch})", f"--patch - < {patch}", f"--patch /dev/stdin < {patch}"):
        r = subprocess.run(["bash", "-c", f"{base} {how} -- {' '.join(FLAGS)}"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 1, r.stderr  # dead: 0.5.9 runs EAGLEWorker here, the patch is in V2
        docs.append(json.loads(r.stdout))
    for d in docs:
        d.pop("timings", None)
    assert all(d == docs[0] for d in docs)
    assert [(p["class"], p["line"]) for p in docs[0]["patched"]] == [("EAGLEWorkerV2", m)]

"""The installed `dynspec` command, run as a user runs it (a real subprocess)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.logs import MARKER, ts, warning_text

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
SEED_LINE = ("[2026-02-27 19:49:17] WARNING server_args.py:2386: " + warning_text("overlap-off-spec-v2-off")
             + " You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. \n")


def run(*args, **kw):
    return subprocess.run(DYNSPEC + list(args), capture_output=True, text=True, timeout=60, **kw)


def test_seed_log_dead_exit_1_and_report_names_the_fix(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(SEED_LINE)
    r = run("verify", str(log))
    assert r.returncode == 1, r.stderr
    assert "DEAD" in r.stdout and "EAGLEWorker" in r.stdout and "SGLANG_ENABLE_SPEC_V2=True" in r.stdout
    j = run("verify", str(log), "--json")
    doc = json.loads(j.stdout)
    assert j.returncode == 1 and doc["verdict"] == "dead" and doc["exit_code"] == 1


@pytest.mark.parametrize("make, needle", [
    (lambda p: str(p / "missing.log"), "no such file"),
    (lambda p: str(p), "is a directory"),
    (lambda p: (p / "bin.log").write_bytes(b"\x00\x01\x02" * 10) and str(p / "bin.log"), "binary file"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, make, needle):
    r = run("verify", make(tmp_path))
    assert r.returncode == 2
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr + r.stdout


def test_unreadable_file_is_exit_2(tmp_path):
    if os.geteuid() == 0:
        # root reads anything: make the path unreadable another way (a dangling symlink loop)
        p = tmp_path / "loop.log"
        p.symlink_to(p)
    else:
        p = tmp_path / "x.log"
        p.write_text("x")
        p.chmod(0)
    r = run("verify", str(p))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("content, needle", [
    ("name = 'x'\n", "missing required field"),
    ("this is not toml", "invalid TOML"),
    ("name='x'\ntitle='y'\n[marker]\npattern='(unclosed'\nliteral='x'\n", "not a valid regex"),
])
def test_bad_feature_file_is_exit_2_naming_the_file(tmp_path, content, needle):
    feat = tmp_path / "feat.toml"
    feat.write_text(content)
    log = tmp_path / "s.log"
    log.write_text(SEED_LINE)
    r = run("verify", str(log), "--feature", str(feat))
    assert r.returncode == 2, r.stdout
    assert str(feat) in r.stderr and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_unknown_bundled_feature(tmp_path):
    log = tmp_path / "s.log"
    log.write_text(SEED_LINE)
    r = run("verify", str(log), "--feature", "no-such-feature")
    assert r.returncode == 2 and "unknown feature" in r.stderr


def test_a_user_feature_file_is_used(tmp_path):
    feat = tmp_path / "mine.toml"
    feat.write_text("name='mine'\ntitle='Mine'\n[marker]\npattern='MY PATCH ON n=(?P<n>\\d+)'\nliteral='MY PATCH ON'\n"
                    "[[patch]]\nmodule='eagle_worker'\nclass='EAGLEWorker'\n")
    log = tmp_path / "s.log"
    log.write_text(SEED_LINE + ts("MY PATCH ON n=3", "TP0") + "\n")
    doc = json.loads(run("verify", str(log), "--feature", str(feat), "--json").stdout)
    assert doc["verdict"] == "live" and doc["feature"] == "mine" and doc["marker"]["fields"] == {"n": "3"}


def test_explain_prints_the_rule_doc_and_rejects_unknown_codes():
    r = run("explain", "DS201")
    assert r.returncode == 0 and "patched-class-not-running" in r.stdout and "How to fix" in r.stdout
    r = run("explain", "DS999")
    assert r.returncode == 2 and "unknown finding code" in r.stderr
    listing = run("explain")
    assert listing.returncode == 0 and "DS103" in listing.stdout and "DS303" in listing.stdout


def test_follow_decides_dead_as_soon_as_the_warning_is_appended(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    proc = subprocess.Popen(DYNSPEC + ["verify", "--follow", "--json", "--timeout", "30", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    with open(log, "a") as fh:
        fh.write(SEED_LINE)
        fh.flush()
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    assert proc.returncode == 1, err
    assert json.loads(out)["verdict"] == "dead"
    assert took < 10  # decided on the line, not at the timeout


def test_follow_waits_for_the_marker_then_live(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(warning_text("spec-v2-on") + "\n")
    proc = subprocess.Popen(DYNSPEC + ["verify", "-f", "--json", "--timeout", "30", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert proc.poll() is None  # undecided: still following
    with open(log, "a") as fh:
        fh.write(ts(MARKER) + "\n")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "live" and doc["worker"]["class"] == "EAGLEWorkerV2"


def test_follow_waits_for_the_newline_of_a_line_written_in_two_halves(tmp_path):
    """The seed's live log replayed with each marker line reaching the file in two writes 1 s apart
    (a block-buffered writer, a slow pipe): each half-line waits for its newline, as tail -F does, so
    the verdict and its line numbers are the finished file's (marker on line 27, TP0-TP7)."""
    seed = (Path(__file__).resolve().parents[2] / "configs" / "demo" / "seed-live.log").read_bytes()
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    proc = subprocess.Popen(DYNSPEC + ["verify", "--follow", "--json", "--timeout", "120", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    split = 0
    with open(log, "ab", buffering=0) as fh:
        for line in seed.splitlines(keepends=True):
            if b"Dynamic speculation disable enabled" in line:
                fh.write(line[:len(line) // 2])
                time.sleep(1.0)
                fh.write(line[len(line) // 2:])
                split += 1
            else:
                fh.write(line)
    out, err = proc.communicate(timeout=120)
    assert split == 8
    assert proc.returncode == 0, err
    followed = json.loads(out)
    finished = json.loads(run("verify", "--json", str(log)).stdout)
    for doc in (followed, finished):
        assert doc["verdict"] == "live"
        assert doc["marker"]["line"] == 27 and doc["marker"]["ranks"] == [f"TP{r}" for r in range(8)]
        assert [(f["code"], f["line"]) for f in doc["findings"]] == [("DS302", 27)]


def test_follow_waits_for_a_log_the_shell_has_not_created_yet(tmp_path):
    """`nohup sglang ... > server.log &` then `dynspec verify --follow server.log`: the file may not be
    there yet. It is waited for (as tail -F), then judged."""
    log = tmp_path / "server.log"
    proc = subprocess.Popen(DYNSPEC + ["verify", "--follow", "--timeout", "60", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert proc.poll() is None  # still waiting, not "no such file"
    seed = Path(__file__).resolve().parents[2] / "configs" / "demo" / "seed-live.log"
    subprocess.run(["sh", "-c", f"nohup cat {seed} > {log} 2>/dev/null &"], check=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "LIVE" in out and err == f"dynspec: {log} does not exist yet; waiting for it to appear\n"


def test_follow_on_a_log_that_never_appears_ends_at_the_timeout_exit_2(tmp_path):
    r = run("verify", "--follow", "--json", "--timeout", "1.5", str(tmp_path / "server.log"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"dynspec: error: {tmp_path / 'server.log'}: no such file (waited 1.5s for it to appear)\n"
    r = run("verify", "--follow", "--timeout", "30", str(tmp_path / "no-dir" / "server.log"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"dynspec: error: {tmp_path / 'no-dir' / 'server.log'}: no such file (its directory does not exist either)"]


def test_a_log_emptied_while_its_server_wrote_is_judged_without_its_nul_hole(tmp_path):
    """`nohup ... > server.log` (no O_APPEND), then `: > server.log` while the server goes on: its next
    write lands at its old offset, so the file starts with a NUL hole. Judged as the same log without
    the NULs (the hole and the line written after it are one physical line: the marker is on line 24,
    not the seed's 27); only real binary is refused."""
    seed = (Path(__file__).resolve().parents[2] / "configs" / "demo" / "seed-live.log").read_bytes()
    first = b"".join(seed.splitlines(keepends=True)[:3])
    log = tmp_path / "server.log"
    with open(log, "wb") as server:  # the server's stdout, as the shell's `>` opens it
        server.write(first)
        server.flush()
        open(log, "wb").close()  # the user empties the log
        server.write(seed[len(first):])
    data = log.read_bytes()
    assert data.startswith(b"\x00" * len(first)) and data.count(b"\x00") == len(first)
    clean = tmp_path / "clean.log"
    clean.write_bytes(seed[len(first):])
    docs = [json.loads(run("verify", "--json", str(p)).stdout) for p in (log, clean)]
    docs.append(json.loads(run("verify", "--follow", "--timeout", "60", "--json", str(log)).stdout))
    for doc in docs:
        assert doc["verdict"] == "live" and doc["marker"]["line"] == 24
        assert doc["marker"]["ranks"] == [f"TP{r}" for r in range(8)]
    assert docs[0] == docs[1] == docs[2]
    elf = Path(sys.executable).resolve().read_bytes()[:200_000]  # NULs and control bytes: binary
    (tmp_path / "python.log").write_bytes(elf)
    r = run("verify", str(tmp_path / "python.log"))
    assert r.returncode == 2 and r.stderr == f"dynspec: error: {tmp_path / 'python.log'}: binary file, not a text log\n"


def test_follow_timeout_gives_inconclusive_exit_3(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ts("Load weight begin. avail mem=70.00 GB") + "\n")
    r = run("verify", "--follow", "--timeout", "1.5", "--json", str(log))
    assert r.returncode == 3 and json.loads(r.stdout)["verdict"] == "inconclusive"


def test_truncated_last_line_without_newline_is_judged(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(SEED_LINE.rstrip("\n").encode())
    assert run("verify", str(log)).returncode == 1


def test_text_of_another_program_is_not_an_empty_log(tmp_path):
    log = tmp_path / "notes.txt"
    log.write_text("hello world\nthis is not a server log\n")
    doc = json.loads(run("verify", "--json", str(log)).stdout)
    (f,) = [f for f in doc["findings"] if f["code"] == "DS304"]
    assert f["message"].startswith("none of its 2 lines is from an sglang server"), f
    assert doc["verdict"] == "inconclusive" and doc["missing"] == ["any sglang server line"]
    log.write_text("\n\n")  # blank lines only: that is empty
    assert "the log is empty." in run("verify", str(log)).stdout


def test_demo_shows_dead_then_live():
    r = run("demo", "--speed", "200", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # one document: --json everywhere prints one
    assert doc["exit_code"] == 0 and [s["log"] for s in doc["scenes"]] == ["seed-dead.log", "seed-live.log"]
    docs = [s["verdict"] for s in doc["scenes"]]
    assert [d["verdict"] for d in docs] == ["dead", "live"]
    assert docs[0]["worker"]["class"] == "EAGLEWorker" and docs[1]["worker"]["class"] == "EAGLEWorkerV2"


def test_docs_findings_table_is_the_registry():
    """docs/findings.md (generated: tests/docs/test_findings_doc.py) has one row per registered finding,
    in code order, each with the registry's name, severity and what, and nothing else."""
    from dynspec_cli.knowledge.findings import registry

    page = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    rows = [ln for ln in page.splitlines() if ln.startswith("| [DS")]
    want = [f"| [{c}](#{c.lower()}-{d.name}) | {d.name} | {d.severity} | {d.what.replace('|', '/')} |"
            for c, d in sorted(registry().items())]
    assert rows == want
    assert len(registry()) >= 30 and all(c.startswith("DS") for c in registry())


def test_follow_on_an_idle_log_sleeps(tmp_path):
    """Watching a log that does not change costs almost no CPU (no busy loop)."""
    import resource

    log = tmp_path / "idle.log"
    log.write_text(ts("Load weight begin. avail mem=70.00 GB") + "\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run("verify", "--follow", "--timeout", "4", "--json", str(log))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 3
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu < 2.0, f"{cpu:.2f} CPU-s for 4 s of idle following"


SEED_LIVE = Path(__file__).resolve().parents[2] / "configs" / "demo" / "seed-live.log"


@pytest.mark.parametrize("shell", [
    "cat {log} | {dynspec} verify --json /dev/stdin",
    "cat {log} | {dynspec} verify --json -",
    "{dynspec} verify --json - < {log}",
    "{dynspec} verify --json <(cat {log})",
    "cat {log} | {dynspec} verify --json --follow --timeout 60 -",
    "{dynspec} verify --json --follow --timeout 60 <(cat {log})",
    "mkfifo {tmp}/fifo && {{ cat {log} > {tmp}/fifo & }} && {dynspec} verify --json {tmp}/fifo",
])
def test_standard_input_and_pipes_are_read_as_they_come(tmp_path, shell):
    """The seed's live log through stdin, /dev/stdin, process substitution and a FIFO: the verdict
    of the file (marker on line 27, TP0-TP7)."""
    cmd = shell.format(log=SEED_LIVE, dynspec=" ".join(DYNSPEC), tmp=tmp_path)
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "live" and doc["marker"]["line"] == 27
    assert doc["marker"]["ranks"] == [f"TP{i}" for i in range(8)]


def test_follow_on_a_pipe_decides_before_the_writer_ends(tmp_path):
    proc = subprocess.Popen(DYNSPEC + ["verify", "--follow", "--json", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(SEED_LINE.encode())
        proc.stdin.flush()
        out = proc.stdout.read()  # the verdict, while the pipe stays open
        assert proc.wait(timeout=30) == 1 and json.loads(out)["verdict"] == "dead"
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()


def test_a_log_pasted_into_a_terminal_is_read_to_ctrl_d(tmp_path):
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(DYNSPEC + ["verify", "--json", "-"], stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    os.close(slave)
    try:
        for line in SEED_LIVE.read_bytes().splitlines(keepends=True):
            os.write(master, line.replace(b"\n", b"\r"))  # as typed: the terminal turns CR into NL
        os.write(master, b"\x04")  # Ctrl-D on an empty line: the end
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(master)
        proc.kill()
    assert proc.returncode == 0, err
    assert err == b"dynspec: reading the log from the terminal; end it with Ctrl-D\n"
    doc = json.loads(out)
    assert doc["verdict"] == "live" and doc["marker"]["line"] == 27


def test_a_pipe_is_read_with_bounded_memory(tmp_path):
    """64 MB of decode lines after the seed's start-up, through a pipe: never held whole."""
    decode = b"[2026-02-27 20:05:00 TP0] Decode batch, #running-req: 3, #token: 1234, token usage: 0.01, " \
             b"accept len: 2.10, cuda graph: True, gen throughput (token/s): 123.45, #queue-req: 0\n"
    n = (64 << 20) // len(decode)
    cmd = (f"{{ cat {SEED_LIVE}; yes '{decode.decode().strip()}' | head -n {n}; }} | "
           f"{' '.join(DYNSPEC)} verify --json -")
    measure = ("import resource, subprocess, sys; r = subprocess.run(['bash', '-c', sys.argv[1]]); "
               "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", measure, cmd], capture_output=True, text=True, timeout=300)
    rc, peak_kb = map(int, r.stderr.split())
    assert rc == 0 and json.loads(r.stdout)["launch"]["decode_lines"] == n
    assert peak_kb < 60 << 10, f"peak RSS {peak_kb >> 10} MB for a 64 MB stream"


@pytest.mark.parametrize("make, stdin, needle", [
    (lambda p: "/dev/zero", None, "/dev/zero: a character device, not a log file"),
    (lambda p: "/dev/null", None, "/dev/null: a character device, not a log file"),
    (lambda p: "/dev/urandom", None, "/dev/urandom: a character device, not a log file"),
    (lambda p: "-", "/dev/zero", "standard input is a character device, not a log"),
    (lambda p: "-", "/dev/null", "standard input is a character device, not a log"),
    (lambda p: "-", "random", "standard input: binary data, not text"),
    (lambda p: (os.mkfifo(p / "fifo"), str(p / "fifo"))[1], None,
     "fifo: a FIFO that nothing writes to (no writer opened it within 5 s)"),
])
@pytest.mark.parametrize("follow", [False, True])
def test_special_files_are_one_line_exit_2_and_never_hang(tmp_path, make, stdin, needle, follow):
    path = make(tmp_path)
    if stdin == "random":
        (tmp_path / "random").write_bytes(Path(sys.executable).resolve().read_bytes()[:100_000])
        stdin = str(tmp_path / "random")
    with open(stdin or os.devnull, "rb") as fh:
        r = subprocess.run(DYNSPEC + ["verify", *(["--follow"] if follow else []), path], stdin=fh,
                           capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.endswith(needle + "\n") and r.stderr.count("\n") == 1, r.stderr

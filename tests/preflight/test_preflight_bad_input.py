"""Bad input to preflight, verify and launch is one line on stderr and exit 2: the real `dynspec`
console script of this venv, as a user runs it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

DYNSPEC = str(Path(sys.executable).with_name("dynspec"))
FLAGS = ["--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1"]


def run(args, tmp_path, **kw):
    env = dict(os.environ, HOME=str(tmp_path))  # launch writes run records under HOME
    r = subprocess.run([DYNSPEC, *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, **kw)
    return r


def assert_one_line(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Exception in thread" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynspec: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_nonexistent_python(tmp_path):
    # several times: the stdin writer thread used to race the process's exit ("I/O operation on closed file")
    for _ in range(6):
        r = run(["preflight", "--python", str(tmp_path / "no-such-python"), "--", *FLAGS], tmp_path)
        assert_one_line(r, "no-such-python", "no such interpreter")


def test_a_python_that_is_not_executable(tmp_path):
    f = tmp_path / "python"
    f.write_text("not a program")
    assert_one_line(run(["preflight", "--python", str(f), "--", *FLAGS], tmp_path), str(f), "not an executable")


def test_a_python_that_looks_like_an_assignment_or_an_option(tmp_path):
    # `PY=python3` is a program name like any other (there is none by that name); `-x` is no path
    assert_one_line(run(["preflight", "--python", "PY=python3", "--", *FLAGS], tmp_path),
                    "PY=python3 on local: no such interpreter")
    assert_one_line(run(["preflight", "--python", "-python3", "--", *FLAGS], tmp_path), "'-python3'",
                    "starts with '-'")


def test_a_binary_patch(tmp_path):
    patch = tmp_path / "p.diff"
    patch.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    assert_one_line(run(["preflight", "--python", sys.executable, "--patch", str(patch), "--", *FLAGS], tmp_path),
                    "not a text diff")


@pytest.mark.parametrize("content, why", [
    ("see the PR: speculative disable threshold\n", "no 'diff --git' line"),
    ("", "it is empty"),  # `git diff > p.diff` with nothing changed
    ("@@ -1,2 +1,3 @@\n a\n+b\n", "no 'diff --git' line"),  # a hunk without its file
])
def test_a_patch_that_is_not_a_diff(tmp_path, content, why):
    patch = tmp_path / "p.diff"
    patch.write_text(content)
    assert_one_line(run(["preflight", "--python", sys.executable, "--patch", str(patch), "--", *FLAGS], tmp_path),
                    f"{patch}: not a unified diff ({why}", "git diff")


@pytest.mark.parametrize("version,words", [("banana", ["'banana'", "not a version"]),
                                           ("0.5.90", ["0.5.90", "not an sglang release", "0.5.3", "0.5.23"])])
def test_a_bad_sglang_version_for_verify(tmp_path, version, words):
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m')\n")
    assert_one_line(run(["verify", str(log), "--sglang-version", version], tmp_path), *words)
    assert_one_line(run(["verify", str(log), "--json", f"--sglang-version={version}"], tmp_path), *words)


def test_a_bad_sglang_version_in_a_preflight_profile(tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text(f'name = "p"\nhost = "local"\npython = "{sys.executable}"\nsglang_version = "0.5.90"\n'
                    '[flags]\nspeculative-algorithm = "EAGLE3"\n')
    assert_one_line(run(["preflight", str(prof)], tmp_path), "0.5.90", "not an sglang release")


def test_launch_with_a_nonexistent_python_starts_nothing(tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text(f'name = "p"\nhost = "local"\npython = "{tmp_path / "no-such-python"}"\n'
                    '[flags]\nspeculative-algorithm = "EAGLE3"\n')
    r = run(["launch", str(prof), "--no-watch"], tmp_path)
    assert_one_line(r, "no such interpreter")
    assert "started" not in r.stdout
    assert not list((tmp_path / ".dynspec").rglob("*.json")) if (tmp_path / ".dynspec").exists() else True


@pytest.mark.parametrize("make, stdin, needle", [
    (lambda p: (os.mkfifo(p / "fifo"), str(p / "fifo"))[1], None,
     "--patch " + "{tmp}/fifo: a FIFO that nothing writes to (no writer opened it within 5 s)"),
    (lambda p: "/dev/zero", None, "--patch /dev/zero: a character device, not a diff file"),
    (lambda p: "/dev/urandom", None, "--patch /dev/urandom: a character device, not a diff file"),
    (lambda p: "-", "/dev/zero", "--patch standard input is a character device, not a diff"),
    (lambda p: (p / "big.diff").write_bytes(b"+" * (17 << 20)) and str(p / "big.diff"), None,
     "{tmp}/big.diff: more than 16 MiB, not the diff of a patch"),
])
def test_a_patch_that_is_a_special_file_is_one_line_and_never_hangs(tmp_path, make, stdin, needle):
    path = make(tmp_path)
    with open(stdin or os.devnull, "rb") as fh:
        r = run(["preflight", "--python", sys.executable, "--patch", path, "--", *FLAGS], tmp_path, stdin=fh)
    assert_one_line(r, needle.format(tmp=tmp_path))


def test_an_endless_patch_on_a_pipe_is_cut_at_16_mib(tmp_path):
    r = subprocess.run(["bash", "-c", f"yes + | {DYNSPEC} preflight --python {sys.executable} --patch - -- "
                                      + " ".join(FLAGS)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert_one_line(r, "standard input: more than 16 MiB, not the diff of a patch")


def test_a_profile_python_that_looks_like_an_option_is_refused(tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text('name = "p"\nhost = "local"\npython = "-i"\n[flags]\nspeculative-algorithm = "EAGLE3"\n')
    assert_one_line(run(["launch", str(prof), "--no-preflight"], tmp_path), "python '-i'", "starts with '-'")

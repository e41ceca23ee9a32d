"""inject/hostcheck.py under a separate, isolated interpreter (as on a server's host): one JSON
object for every question, also when the question fails."""
import json
import socket
import subprocess
import sys
import time

from dynspec_cli import inject


def ask(*argv):
    r = subprocess.run([sys.executable, "-I", "-", *argv], input=inject.program("hostcheck.py"), capture_output=True,
                       text=True, timeout=30)
    return r.returncode, json.loads(r.stdout)


def test_a_listening_port_is_taken_and_a_closed_one_free():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert ask("port-free", str(port)) == (0, {"free": False, "error": None})
    assert ask("port-free", str(port))[1]["free"] is True


def test_health_of_a_port_nobody_serves():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, doc = ask("health", str(port), "/health_generate", "/health")
    assert code == 0 and doc["ok"] is False and doc["status"].startswith("/health ")


def test_hashes_and_unreadable_files(tmp_path):
    f = tmp_path / "a.py"
    f.write_bytes(b"x = 1\n")
    code, doc = ask("hash-files", json.dumps([str(f), str(tmp_path / "missing.py")]))
    import hashlib

    assert doc["hashes"][str(f)] == hashlib.sha256(b"x = 1\n").hexdigest()
    assert doc["hashes"][str(tmp_path / "missing.py")].startswith("unreadable: ")


def test_failure_is_json_too():
    code, doc = ask("port-free", "not-a-port")
    assert code == 1 and doc["error"].startswith("ValueError") and "exception_traceback" in doc
    code, doc = ask("no-such-question")
    assert code == 1 and doc["error"].startswith("KeyError")


def test_process_is_what_proc_says_and_a_gone_pid_is_not_alive():
    import hashlib
    from pathlib import Path

    p = subprocess.Popen(["sleep", "30"])
    try:
        code, doc = ask("process", str(p.pid))
        stat = Path(f"/proc/{p.pid}/stat").read_text()
        assert code == 0 and doc["alive"] is True
        assert doc["start"] == stat.rsplit(")", 1)[1].split()[19]  # proc(5): field 22, starttime
        assert doc["cmdline_sha256"] == hashlib.sha256(b"sleep\x0030\x00").hexdigest()
        assert doc["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    finally:
        p.kill()
        p.wait()
    code, doc = ask("process", str(p.pid))
    assert code == 0 and doc["alive"] is False and "start" not in doc
    z = subprocess.Popen(["true"])  # exited, not reaped: a zombie keeps its /proc/PID/stat
    try:
        for _ in range(200):
            if Path(f"/proc/{z.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.01)
        code, doc = ask("process", str(z.pid))
        assert code == 0 and doc["alive"] is False and doc["cmdline_sha256"] is None
    finally:
        z.wait()
    code, doc = ask("process", "nope")  # not a pid: still one JSON object, naming the error
    assert code == 1 and doc["error"].startswith("ValueError")

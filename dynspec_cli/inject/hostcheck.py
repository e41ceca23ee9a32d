"""Small questions about the server's host, answered by the server's own python (stdlib only;
one JSON object on stdout, also on failure). dynspec sends this text on stdin:

    python - port-free PORT     {"free": bool}            (as the server will bind: TIME_WAIT is free)
    python - health PORT PATH...  {"ok": bool, "status": "/health_generate 200"}  (PATHs asked in turn: the
                                engine's readiness, engines/__init__.py SERVING)
    python - free-port          {"port": N}               (a port the kernel hands out on 0.0.0.0)
    python - source-addr ADDR   {"addr": "10.0.0.1"|""}   (this host's address towards ADDR)
    python - hash-files JSON    {"hashes": {path: sha256 | "unreadable: ..."}}
    python - process PID        {"pid": N, "alive": bool, "start": clock ticks since boot, "cmdline_sha256",
                                 "boot_id"}                (a process as this host sees it, for gate)
"""
import hashlib
import json
import socket
import sys
import traceback


def port_free(port):
    for addr in ("0.0.0.0", "127.0.0.1"):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, int(port)))
        except OSError:
            return {"free": False}
        finally:
            s.close()
    return {"free": True}


def health(port, *paths):
    import urllib.request

    last = None
    for path in paths:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=5) as r:
                return {"ok": r.status == 200, "status": "%s %s" % (path, r.status)}
        except Exception as e:  # noqa: BLE001 - any failure is an answer
            last = "%s %s" % (path, getattr(e, "code", None) or type(e).__name__)
    return {"ok": False, "status": last}


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("0.0.0.0", 0))
    try:
        return {"port": s.getsockname()[1]}
    finally:
        s.close()


def source_addr(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((addr, 9))
        return {"addr": s.getsockname()[0]}
    except OSError:
        return {"addr": ""}
    finally:
        s.close()


def hash_files(paths_json):
    out = {}
    for p in json.loads(paths_json):
        try:
            with open(p, "rb") as f:
                out[p] = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            out[p] = "unreadable: %s" % e.strerror
    return {"hashes": out}


def process(pid):
    out = {"pid": int(pid), "alive": False}
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            stat = f.read()
        rest = stat[stat.rfind(")") + 2:].split()
        out["start"] = rest[19]
        with open("/proc/%d/cmdline" % int(pid), "rb") as f:
            cmdline = f.read()
        # (as runstate.py and prove/receipt.py: a zombie is not alive, an empty cmdline is no hash)
        out["cmdline_sha256"] = hashlib.sha256(cmdline).hexdigest() if cmdline else None
        out["alive"] = rest[0] not in ("Z", "X", "x")
    except (OSError, IndexError):
        pass
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            out["boot_id"] = f.read().strip()
    except OSError:
        pass
    return out


QUESTIONS = {"port-free": port_free, "health": health, "free-port": free_port, "source-addr": source_addr,
             "hash-files": hash_files, "process": process}


def main(argv):
    try:
        doc = QUESTIONS[argv[0]](*argv[1:])
        doc["error"] = None
    except Exception as e:  # noqa: BLE001 - JSON even on failure
        doc = {"error": "%s: %s" % (type(e).__name__, e), "exception_traceback": traceback.format_exc()}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0 if doc["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

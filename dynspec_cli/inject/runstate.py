"""What the run records on this host say, and what its processes are, in one round trip.

Runs inside the host's Python (3.8+), sent on stdin (`python - COMMAND JSON`): stdlib only, imports
nothing of dynspec, writes nothing on the host. Prints one JSON document on stdout, also when it
fails ({"ok": false, "error": ..., "exception_traceback": ...}, exit 1). Linux /proc only: without it
every identity is unproven (and so no process is ever signalled).

Commands (the argument is one JSON object):
  status    {"dir": RUNS_DIR, "names": [..] | null, "window_live": N, "window_done": N}
            every run record in RUNS_DIR (or only those named): the record's text, whether its
            process group is alive, the leader's start time, `identify` for it (for an unfinished
            "starting" record from its pid file or launch token), the log's size and
            mtime and its last bytes (window_live for runs not known to be over, window_done else).
  identify  {"pid": P, "pgid": G, "token": T | null, "argv": [..] | null, "pid_file": PATH | null}
            who P and the members of group G are: start times, whether they carry the token
            (DYNSPEC_RUN_ID=T in /proc/PID/environ), whether P's command line is argv ("***" = any
            word); with pid 0, the pid comes from pid_file or from a scan for the token.
  signal    {"pgid": G, "sig": N, "anchors": [[pid, start], ..]}
            killpg(G, N) only while some anchor (a process proven to be the run's) is still alive
            with that start time in group G: the group cannot have been emptied and reused since.
"""
import base64
import json
import os
import signal
import sys
import time
import traceback

TOKEN_VAR = b"DYNSPEC_RUN_ID="
MASK = "***"


def stat(pid):
    """(state, pgid, start time) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    rest = text[text.rfind(")") + 2:].split()
    if len(rest) < 20:
        return None
    return rest[0], int(rest[2]), rest[19]


def alive(st):
    return st is not None and st[0] not in ("Z", "X", "x")


def processes():
    """pid -> (state, pgid, start) for every visible process."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if n.isdigit():
            st = stat(int(n))
            if st is not None:
                out[int(n)] = st
    return out


def carries(pid, token):
    """True or False; None while the process is exiting: its memory is released before it becomes
    a zombie, and /proc/PID/environ then reads empty (a spawned run always has an environment)."""
    if not token:
        return False
    try:
        with open("/proc/%d/environ" % pid, "rb") as fh:
            env = fh.read()
    except OSError:
        return False
    if not env:
        return None
    return (TOKEN_VAR + token.encode()) in env.split(b"\0")


def cmdline_is(pid, argv):
    if not argv:
        return False
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            words = fh.read().split(b"\0")
    except OSError:
        return False
    if words and words[-1] == b"":
        words = words[:-1]
    words = [w.decode("utf-8", "surrogateescape") for w in words]
    if len(words) != len(argv):
        return False
    for have, want in zip(words, argv):
        if want == MASK:
            continue
        if want.endswith("=" + MASK) and have.startswith(want[:-len(MASK)]):
            continue
        if have != want:
            return False
    return True


def read_pid_file(path):
    if not path:
        return None
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def token_procs(procs, token):
    return [[pid, st[1], st[2]] for pid, st in sorted(procs.items()) if alive(st) and carries(pid, token)]


def identify(req, procs=None):
    procs = processes() if procs is None else procs
    token = req.get("token")
    pid, pgid = int(req.get("pid") or 0), int(req.get("pgid") or 0)
    out = {"proc": os.path.isdir("/proc/self")}
    from_file = read_pid_file(req.get("pid_file"))
    out["pid_file_pid"] = from_file
    if pid <= 0:
        pid = from_file or 0
        if pid <= 0 and token:
            found = token_procs(procs, token)
            out["token_procs"] = found
            if found:
                pid = found[0][1]  # the group leader is the spawned process: pid == pgid
        pgid = pid
    out["pid"], out["pgid"] = pid, pgid
    leader = None
    if pid > 0:
        st = procs.get(pid) or stat(pid)
        has = carries(pid, token) if alive(st) else None
        if alive(st) and has is not None:  # an exiting leader is gone already, as a zombie is
            leader = {"pgid": st[1], "start": st[2], "token": has,
                      "cmdline": cmdline_is(pid, req.get("argv"))}
    out["leader"] = leader
    members = []
    if pgid > 1:
        for p, st in sorted(procs.items()):
            if st[1] == pgid and alive(st):
                has = carries(p, token)
                if has is not None:
                    members.append({"pid": p, "start": st[2], "token": has})
    out["members"] = members
    out["group_alive"] = bool(members)
    return out


def status(req):
    d = req["dir"]
    wanted = req.get("names")
    procs = processes()
    by_group = {}
    for pid, st in procs.items():
        if alive(st):
            by_group.setdefault(st[1], []).append(pid)
    runs = []
    try:
        files = sorted(os.listdir(d))
    except OSError:
        files = []
    for f in files:
        if not f.endswith(".json") or f.endswith((".group.json", ".receipt.json")) or ".dynspec-tmp." in f:
            continue
        name = f[:-5]
        if wanted is not None and name not in wanted:
            continue
        row = {"file": name}
        try:
            with open(os.path.join(d, f), "rb") as fh:
                text = fh.read()
            rec = json.loads(text)
            if not isinstance(rec, dict):
                raise ValueError("not an object")
        except (OSError, ValueError) as e:
            row["error"] = "%s: %s" % (type(e).__name__, e)
            runs.append(row)
            continue
        row["record"] = text.decode("utf-8", "replace")
        pgid = int(rec.get("pgid") or 0)
        # who the processes are, as `identify` says for stop: status calls a run alive only when
        # stop would stop it (dynspec's ownership.prove decides from this)
        row["identify"] = identify({"pid": rec.get("pid"), "pgid": pgid, "token": rec.get("token"),
                                    "argv": rec.get("argv"),
                                    "pid_file": rec.get("pid_file") if rec.get("state") == "starting" else None},
                                   procs)
        pgid = row["identify"]["pgid"]
        row["group_alive"] = pgid > 1 and bool(by_group.get(pgid))
        st = procs.get(int(rec.get("pid") or 0))
        row["leader_start"] = st[2] if alive(st) else None
        log, start = rec.get("log"), int(rec.get("log_offset") or 0)
        over = rec.get("stopped_at") is not None and rec.get("verdict") is not None
        window = int(req["window_done"] if over else req["window_live"])
        try:
            sz = os.stat(log)
            size = sz.st_size
            frm = max(start, size - window)
            with open(log, "rb") as fh:
                fh.seek(frm)
                data = fh.read(max(0, size - frm))
            row.update(log_size=size, log_mtime=sz.st_mtime, log_from=frm,
                       log_data=base64.b64encode(data).decode("ascii"))
        except FileNotFoundError:
            row["log_error"] = "missing"
        except (OSError, TypeError) as e:
            row["log_error"] = "%s: %s" % (type(e).__name__, e)
        runs.append(row)
    return {"dir": d, "runs": runs, "proc": os.path.isdir("/proc/self")}


def send_signal(req):
    pgid, sig = int(req["pgid"]), int(req["sig"])
    if pgid <= 1:
        return {"signalled": False, "why": "refusing to signal process group %d" % pgid}
    for pid, start in req.get("anchors") or []:
        st = stat(int(pid))
        if alive(st) and st[1] == pgid and st[2] == start:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return {"signalled": False, "why": "gone"}
            return {"signalled": True, "anchor": pid}
    return {"signalled": False, "why": "no proven process of the run is left in the group"}


def main():
    try:
        cmd, req = sys.argv[1], json.loads(sys.argv[2])
        if cmd == "status":
            doc = status(req)
        elif cmd == "identify":
            doc = identify(req)
        elif cmd == "signal":
            doc = send_signal(req)
        else:
            raise ValueError("unknown command %r" % cmd)
        doc["ok"] = True
        doc["now"] = time.time()
        code = 0
    except BaseException as e:  # noqa: B902 - the caller reads JSON whatever happened
        doc = {"ok": False, "error": "%s: %s" % (type(e).__name__, e),
               "exception_traceback": traceback.format_exc()}
        code = 1
    sys.stdout.write(json.dumps(doc))
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()

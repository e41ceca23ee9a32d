"""Follow a file from a byte offset and write framed records to stdout.

Runs inside the target host's Python (3.8+), sent on stdin (`python -u - PATH OFFSET [options]`):
stdlib only, imports nothing of dynspec, writes nothing on the host. Even when it fails it prints a
framed `error` record (with `exception_traceback`) before exiting 1.

Options: --inode N      the inode OFFSET refers to (resuming): a different file there -> `gap`
         --heartbeat S  seconds of silence before an `hb` record (default 1.0)
         --poll S       poll interval when inotify is unavailable (default 0.01)
         --no-inotify   poll even where inotify exists (tests, odd filesystems)

Framing: every record is one line of compact JSON ending in "\n"; a `data` record's line is
followed by exactly `n` raw bytes. `off` is always a byte offset in the file named by `ino`.
  hello      {"k":"hello","v":1,"pid":P,"python":"3.8.10","watch":"inotify"|"poll"}
  data       {"k":"data","off":O,"ino":I,"n":N} + N bytes; the next data starts at O+N
  truncated  {"k":"truncated","off":0,"ino":I,"size":S}        file shrank below our offset
  rotated    {"k":"rotated","off":0,"ino":NEW,"old_ino":I,"old_off":O}
             path names a new file; the old one was read to its end through our open fd first
  missing    {"k":"missing","off":O,"ino":I|null}              path does not exist (now); waiting
  gap        {"k":"gap","off":0,"ino":NEW,"old_ino":I,"old_off":O}
             resuming (--inode) found another file at path: bytes of the old one may be lost
  hb         {"k":"hb","off":O,"ino":I|null}                   nothing happened for a while
  error      {"k":"error","msg":"...","exception_traceback":"..."}
"""
import json
import os
import select
import struct
import sys
import time
import traceback

VERSION = 1
CHUNK = 65536
# With inotify we sleep until the kernel wakes us; this bounds latency where it stays silent
# (files changed from another NFS client, a watch that could not be set up).
SAFETY_POLL = 0.5

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_IGNORED = 0x8000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


class Out(object):
    def __init__(self):
        self.last = time.monotonic()

    def record(self, kind, data=b"", **fields):
        head = {"k": kind}
        head.update(fields)
        if kind == "data":
            head["n"] = len(data)
        buf = json.dumps(head, separators=(",", ":")).encode("ascii") + b"\n" + data
        view = memoryview(buf)
        while view:
            n = os.write(1, view)
            view = view[n:]
        self.last = time.monotonic()


class PollWatcher(object):
    kind = "poll"

    def __init__(self, path, interval):
        self.interval = interval

    def watch_file(self, path):
        pass

    def wait(self, timeout):
        time.sleep(max(0.0, min(timeout, self.interval)))

    def close(self):
        pass


class InotifyWatcher(object):
    """Wakes on changes to the followed file (by inode: follows it through a rename) and on
    entries created, moved or deleted in its directory (rotation, creation)."""

    kind = "inotify"

    def __init__(self, path):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(libc, "inotify_init1"):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.libc = libc
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.dir = os.path.dirname(os.path.abspath(path)) or "/"
        self.dir_wd = -1
        self.file_wd = -1
        self._watch_dir()

    def _add(self, path, mask):
        return self.libc.inotify_add_watch(self.fd, os.fsencode(path), mask)

    def _watch_dir(self):
        if self.dir_wd < 0:
            self.dir_wd = self._add(
                self.dir, IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
            )

    def watch_file(self, path):
        if self.file_wd >= 0:
            self.libc.inotify_rm_watch(self.fd, self.file_wd)
        self.file_wd = self._add(path, IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

    def wait(self, timeout):
        self._watch_dir()
        limit = SAFETY_POLL if self.dir_wd >= 0 else 0.05
        ready, _, _ = select.select([self.fd], [], [], max(0.0, min(timeout, limit)))
        if ready:
            try:
                while True:
                    self._forget(os.read(self.fd, CHUNK))
            except (BlockingIOError, InterruptedError):
                pass

    def _forget(self, events):
        # a watch the kernel dropped (its directory or file is gone) must be set up again
        at = 0
        while at + 16 <= len(events):
            wd, mask, _cookie, size = struct.unpack_from("iIII", events, at)
            at += 16 + size
            if mask & IN_IGNORED:
                if wd == self.dir_wd:
                    self.dir_wd = -1
                if wd == self.file_wd:
                    self.file_wd = -1

    def close(self):
        os.close(self.fd)


def make_watcher(path, use_inotify, poll):
    if use_inotify and sys.platform.startswith("linux"):
        try:
            return InotifyWatcher(path)
        except Exception:
            pass
    return PollWatcher(path, poll)


def parse_args(argv):
    if len(argv) < 2:
        raise ValueError("usage: follower PATH OFFSET [--inode N] [--heartbeat S] [--poll S] [--no-inotify]")
    opts = {"path": argv[0], "offset": int(argv[1]), "inode": None, "heartbeat": 1.0, "poll": 0.01,
            "inotify": True}
    rest = list(argv[2:])
    while rest:
        flag = rest.pop(0)
        if flag == "--no-inotify":
            opts["inotify"] = False
        elif flag in ("--inode", "--heartbeat", "--poll") and rest:
            value = rest.pop(0)
            opts[flag[2:]] = int(value) if flag == "--inode" else float(value)
        else:
            raise ValueError("unknown option %r" % flag)
    return opts


def follow(path, offset, inode, heartbeat, watcher, out):
    fd = None
    ino = None
    pos = offset
    expect = inode  # inode that `pos` refers to, until we have opened something
    rotating = None  # (old_ino, old_off) while switching to a new file at path
    said_missing = False
    while True:
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                if not said_missing:
                    out.record("missing", off=pos, ino=None)
                    said_missing = True
                watcher.wait(heartbeat - (time.monotonic() - out.last))
                beat(out, heartbeat, pos, None)
                continue
            st = os.fstat(fd)
            ino = st.st_ino
            said_missing = False
            watcher.watch_file(path)
            if rotating is not None:
                out.record("rotated", off=0, ino=ino, old_ino=rotating[0], old_off=rotating[1])
                pos, rotating = 0, None
            elif expect is not None and expect != ino:
                out.record("gap", off=0, ino=ino, old_ino=expect, old_off=pos)
                pos = 0
            expect = None
            if st.st_size < pos:
                out.record("truncated", off=0, ino=ino, size=st.st_size)
                pos = 0
            os.lseek(fd, pos, os.SEEK_SET)

        progressed = drain(fd, ino, out, pos)
        pos += progressed

        st = os.fstat(fd)
        if st.st_size < pos:
            out.record("truncated", off=0, ino=ino, size=st.st_size)
            pos = 0
            os.lseek(fd, 0, os.SEEK_SET)
            continue
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        if now is None:
            if not said_missing:
                # deleted or renamed away: keep reading the old file until a new one appears
                out.record("missing", off=pos, ino=ino)
                said_missing = True
        elif (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            pos += drain(fd, ino, out, pos)  # whatever reached the old file before the switch
            os.close(fd)
            fd = None
            rotating = (ino, pos)
            continue
        else:
            said_missing = False
        if progressed:
            continue
        watcher.wait(heartbeat - (time.monotonic() - out.last))
        beat(out, heartbeat, pos, ino)


def drain(fd, ino, out, pos):
    total = 0
    while True:
        data = os.read(fd, CHUNK)
        if not data:
            return total
        out.record("data", data, off=pos + total, ino=ino)
        total += len(data)


def beat(out, heartbeat, pos, ino):
    if time.monotonic() - out.last >= heartbeat:
        out.record("hb", off=pos, ino=ino)


def main(argv):
    out = Out()
    try:
        opts = parse_args(argv)
        watcher = make_watcher(opts["path"], opts["inotify"], opts["poll"])
        out.record("hello", v=VERSION, pid=os.getpid(), python="%d.%d.%d" % sys.version_info[:3],
                   watch=watcher.kind)
        follow(opts["path"], opts["offset"], opts["inode"], opts["heartbeat"], watcher, out)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0  # the reader went away
    except BaseException as e:  # noqa: BLE001 - the reader must get JSON whatever happened
        try:
            out.record("error", msg="%s: %s" % (type(e).__name__, e), exception_traceback=traceback.format_exc())
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    # `python - args` gives argv[0] == "-"
    sys.exit(main(sys.argv[1:]))

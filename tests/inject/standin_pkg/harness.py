"""Run a server (the stand-in or real sglang) as a real process tree with the probe injected through
dynspec_cli.engines.sglang.probe_setup, and split its stderr into probe records per process and everything else."""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from dynspec_cli.engines.sglang.probe_setup import PREFIX, parse_probe_line, probe_env

STANDIN_DIR = Path(__file__).resolve().parent
SPEC_DIR = STANDIN_DIR / "sglang_standin" / "srt" / "speculative"
PY310 = "/root/.pyenv/versions/3.10.13/bin/python3.10"
PY312 = "/root/.pyenv/versions/3.12.1/bin/python3.12"
PY313 = "/root/.pyenv/versions/3.13.0/bin/python3.13"


def interpreters() -> list[str]:
    """3.10, 3.11 (this interpreter) and 3.12 (required), 3.13 when installed."""
    out = [PY310, sys.executable, PY312]
    missing = [p for p in out if not os.path.exists(p)]
    assert not missing, f"interpreters missing: {missing}"
    return out + ([PY313] if os.path.exists(PY313) else [])


def py_id(python: str) -> str:
    return "py" + ".".join(map(str, _version(python)[:2]))


_VERSIONS: dict = {}


def _version(python: str) -> tuple:
    if python not in _VERSIONS:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:3])"], capture_output=True,
                             text=True, check=True).stdout
        _VERSIONS[python] = tuple(int(x) for x in out.split())
    return _VERSIONS[python]


def marked_lines(path: Path, marker: str) -> list[int]:
    """Line numbers whose trailing comment is exactly `# <marker>`."""
    rx = re.compile(r"#\s*" + re.escape(marker) + r"\s*$")
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if rx.search(line)]


def function_span(path: Path, cls: str, function: str) -> range:
    import ast

    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == function:
                    return range(item.lineno, item.end_lineno + 1)
    raise LookupError(f"{cls}.{function} not in {path}")


@dataclasses.dataclass
class PatchTarget:
    """A patched function of the stand-in and which of its patch lines run / never run / hold no code."""
    module_file: str  # module-relative, as dynspec passes it
    cls: str
    function: str
    runs: list
    never: list
    nocode: list

    @property
    def lines(self) -> list:
        return sorted(self.runs + self.never + self.nocode)

    def as_target(self, absolute: bool = False) -> dict:
        file = str(STANDIN_DIR / self.module_file) if absolute else self.module_file
        return {"file": file, "class": self.cls, "function": self.function, "lines": self.lines}


def standin_target(module: str, cls: str, function: str) -> PatchTarget:
    path = SPEC_DIR / f"{module}.py"
    span = function_span(path, cls, function)

    def inside(marker):
        return [n for n in marked_lines(path, marker) if n in span]

    return PatchTarget(f"sglang_standin/srt/speculative/{module}.py", cls, function, inside("PATCH"),
                       inside("PATCH-NEVER"), inside("PATCH-NOCODE"))


def v2_forward() -> PatchTarget:
    return standin_target("eagle_worker_v2", "EAGLEWorkerV2", "forward_batch_generation")


def v2_init() -> PatchTarget:
    return standin_target("eagle_worker_v2", "EAGLEWorkerV2", "__init__")


def v1_forward() -> PatchTarget:
    return standin_target("eagle_worker", "EAGLEWorker", "forward_batch_generation")


# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Proc:
    pid: int
    records: list

    def events(self, name: str) -> list:
        return [r for r in self.records if r["event"] == name]

    def one(self, name: str) -> dict:
        found = self.events(name)
        assert len(found) == 1, f"pid {self.pid}: expected one {name!r} line, got {len(found)}: {found}"
        return found[0]

    @property
    def role(self) -> str:
        return self.records[-1]["role"]

    @property
    def ppid(self) -> int:
        return self.records[0]["ppid"]

    @property
    def rank(self) -> Optional[dict]:
        return self.records[-1].get("rank")


@dataclasses.dataclass
class Run:
    cmd: list
    returncode: int
    stdout: str
    stderr: str
    pid: int

    # Each probe line is one os.write() of a whole line, so it is never split; but when another process
    # of the server has written part of a line (a traceback is written in pieces), the probe's line can
    # land inside it. Cutting the probe's segments out restores the other process's output exactly.
    @property
    def _probe_segments(self) -> list:
        return re.findall(re.escape(PREFIX) + r"[^\n]*\n?", self.stderr)

    @property
    def probe_lines(self) -> list:
        return [seg.rstrip("\n") for seg in self._probe_segments]

    @property
    def records(self) -> list:
        recs = [parse_probe_line(ln) for ln in self.probe_lines]
        assert all(recs), [ln for ln, r in zip(self.probe_lines, recs) if r is None]
        return recs

    @property
    def other_stderr(self) -> list:
        """stderr with the probe's lines cut out, as a sorted list (processes interleave)."""
        rest = re.sub(re.escape(PREFIX) + r"[^\n]*\n?", "", self.stderr)
        return sorted(rest.splitlines())

    def procs(self) -> dict:
        by = defaultdict(list)
        for r in self.records:
            by[r["pid"]].append(r)
        return {pid: Proc(pid, recs) for pid, recs in by.items()}

    def with_role(self, role: str) -> list:
        return sorted((p for p in self.procs().values() if p.role == role), key=lambda p: (p.rank or {}).get("tp", 0))

    def errors(self) -> list:
        return [r for r in self.records if r["event"] == "error"]


def base_env(extra_paths: Sequence[os.PathLike] = ()) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "DYNSPEC_PROBE")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*extra_paths, STANDIN_DIR])
    return env


def injected_env(targets: Iterable[Mapping], *, extra_paths: Sequence[os.PathLike] = (), **options) -> dict:
    env = base_env(extra_paths)
    options.setdefault("package", "sglang_standin")
    env.update(probe_env(list(targets), existing_pythonpath=env["PYTHONPATH"], **options))
    return env


def standin_cmd(python: str, *args: str) -> list:
    return [python, "-m", "sglang_standin.launch_server", *args]


def run(cmd: Sequence[str], env: Mapping[str, str], *, timeout: float = 120, cwd: Optional[os.PathLike] = None) -> Run:
    proc = subprocess.run(list(cmd), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          cwd=cwd or STANDIN_DIR.parent)
    return Run(list(cmd), proc.returncode, proc.stdout.decode("utf-8", "replace"),
               proc.stderr.decode("utf-8", "replace"), -1)


class Server:
    """A long-running launcher: stderr collected by a thread, waits on text, signals, stops."""

    def __init__(self, cmd: Sequence[str], env: Mapping[str, str], cwd: Optional[os.PathLike] = None):
        import threading

        self.cmd = list(cmd)
        self.proc = subprocess.Popen(self.cmd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=cwd or STANDIN_DIR.parent, start_new_session=True)
        self._err, self._out = [], []
        self._threads = [threading.Thread(target=self._pump, args=(s, buf), daemon=True)
                         for s, buf in ((self.proc.stderr, self._err), (self.proc.stdout, self._out))]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream, buf):
        for line in iter(stream.readline, b""):
            buf.append(line.decode("utf-8", "replace"))

    @property
    def stderr(self) -> str:
        return "".join(self._err)

    def wait_for(self, predicate, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate(self.stderr):
                return
            if self.proc.poll() is not None:
                time.sleep(0.2)
                if predicate(self.stderr):
                    return
                raise AssertionError(f"server exited {self.proc.returncode} before the condition:\n"
                                     f"{self.stderr[-4000:]}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting; stderr so far:\n{self.stderr[-4000:]}")

    def records(self) -> list:
        return [r for r in (parse_probe_line(ln) for ln in self.stderr.splitlines()) if r]

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 60) -> Run:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        for t in self._threads:
            t.join(timeout=10)
        return Run(self.cmd, self.proc.returncode, "".join(self._out), self.stderr, self.proc.pid)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

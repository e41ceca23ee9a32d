"""The check of a user's own sbatch script (`dynspec preflight --sbatch FILE`), before it is submitted.

SGLang's multi-node Slurm recipe (docs/references/multi_node_deployment/multi_node.md) runs
`srun ... python3 -m sglang.launch_server ... --node-rank "$SLURM_NODEID"` in the batch script. The
batch script's shell expands `$SLURM_NODEID` once, on the first node, before srun starts any task:
every node gets rank 0 and the servers hang at distributed init. Reading it in each task's own shell
(`srun bash -c '... --node-rank $SLURM_NODEID'`, or a per-task script) gives 0, 1, ...

Findings (configs/findings.toml): DS501 rank expanded by the batch shell; DS502 --nnodes or
--dist-init-addr missing on a multi-node launch; DS503 the rendezvous port is the server's HTTP port;
DS504 the node count asked of Slurm differs from --nnodes. The script is read, never run."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Optional

from dynspec_cli.knowledge.findings import Finding, forced_verdict

LAUNCHERS = ("sglang.launch_server", "sglang serve", "sglang.launch_server.py")
RANK_VARS = ("SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID")
DEFAULT_PORT = 30000  # sglang's ServerArgs.port default


@dataclass
class Line:
    no: int  # first physical line of the logical line
    text: str  # continuation lines joined


def logical_lines(text: str) -> list[Line]:
    """Shell logical lines: backslash continuations and quoted strings spanning lines joined."""
    out, buf, start, q = [], [], 0, None
    for i, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = i
            if raw.lstrip().startswith("#"):
                out.append(Line(i, raw))
                continue
        q = _quote_after(raw, q)
        if q is None and raw.rstrip().endswith("\\"):
            buf.append(raw.rstrip()[:-1])
            continue
        buf.append(raw.rstrip()[:-1] if raw.rstrip().endswith("\\") else raw)
        if q is not None:
            continue
        out.append(Line(start, " ".join(b.strip() for b in buf)))
        buf = []
    if buf:
        out.append(Line(start, " ".join(b.strip() for b in buf)))
    return out


def _quote_after(s: str, q: Optional[str]) -> Optional[str]:
    """The quote still open at the end of `s`, given the one open at its start."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and q != "'":
            i += 2
            continue
        if q is None and c == "#" and (i == 0 or s[i - 1].isspace()):
            return None
        if q is None and c in "'\"":
            q = c
        elif c == q:
            q = None
        i += 1
    return q


def _strip_comment(s: str) -> str:
    """The line without a trailing `# comment` (outside quotes)."""
    q = None
    for i, c in enumerate(s):
        if q:
            if c == q:
                q = None
        elif c in "'\"":
            q = c
        elif c == "#" and (i == 0 or s[i - 1].isspace()):
            return s[:i]
    return s


def batch_expanded(s: str) -> list[tuple[int, str]]:
    """Where the batch script's own shell expands a variable: (position, name) of every `$NAME` /
    `${NAME}` outside single quotes and not escaped."""
    out, q, i = [], None, 0
    while i < len(s):
        c = s[i]
        if c == "\\" and q != "'":
            i += 2
            continue
        if q == "'":
            if c == "'":
                q = None
        elif c == "'" and q is None:
            q = "'"
        elif c == '"':
            q = None if q == '"' else '"'
        elif c == "$":
            m = re.match(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", s[i:])
            if m:
                out.append((i, m.group(1)))
        i += 1
    return out


def _words(s: str) -> list[str]:
    """Shell words; a quoted word holding the launch (`bash -c '... sglang.launch_server ...'`) is
    split again, so the server's flags are seen wherever they are expanded."""
    try:
        words = shlex.split(s, comments=True)
    except ValueError:
        words = s.split()
    out: list[str] = []
    for w in words:
        if " " in w and any(x in w for x in LAUNCHERS) and w != s:
            out += _words(w)
        else:
            out.append(w)
    return out


def _flag(words: list[str], name: str) -> Optional[str]:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def _resolve(v: Optional[str], assigned: dict[str, str]) -> Optional[str]:
    """`$NAME` / `${NAME}` replaced by the batch script's own assignment of NAME, when it has one."""
    if v is None:
        return None
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: assigned.get(m.group(1), m.group(0)), v)


def _int(v: Optional[str]) -> Optional[int]:
    if v is None:
        return None
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", v.strip())
    if not m:
        return None
    return int(m.group(2) or m.group(1)) if m.group(2) is None or m.group(1) == m.group(2) else None


def check(text: str) -> dict[str, Any]:
    lines = logical_lines(text)
    directives: list[str] = []
    rank_aliases: dict[str, int] = {}  # batch-shell variables holding the batch shell's SLURM_NODEID
    assigned: dict[str, str] = {}  # the batch script's own simple assignments (to read HEAD:PORT)
    findings: list[Finding] = []
    launches = []
    for ln in lines:
        s = ln.text.strip()
        if s.startswith("#SBATCH"):
            directives += _words(s[len("#SBATCH"):])
            continue
        body = _strip_comment(s)
        if not body.strip():
            continue
        m = re.match(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", body)
        if m and any(v in RANK_VARS for _, v in batch_expanded(m.group(2))):
            rank_aliases[m.group(1)] = ln.no
        if m:
            vw = _words(m.group(2))
            assigned[m.group(1)] = _resolve(vw[0] if vw else "", assigned)
        if any(x in body for x in LAUNCHERS):
            launches.append((ln, body))
    nodes = _int(_flag(directives, "--nodes") or _flag(directives, "-N"))
    for ln, body in launches:
        words = _words(body)
        under_srun = bool(re.search(r"(^|[\s;&|(])srun(\s|$)", body))
        nnodes = _int(_flag(words, "--nnodes"))
        srun_nodes = None
        if under_srun:
            pre = body[:min(body.find(x) for x in LAUNCHERS if x in body)]
            srun_nodes = _int(_flag(_words(pre), "--nodes") or _flag(_words(pre), "-N"))
        # DS501: the rank value expanded by the batch shell (directly, or through a variable it set)
        rm = re.search(r"--node-rank(?:=|\s+)(\S+)", body)
        if under_srun and rm:
            start, end = rm.start(1), rm.end(1)
            hits = [(p, v) for p, v in batch_expanded(body) if start <= p < end]
            bad = [v for _, v in hits if v in RANK_VARS or v in rank_aliases]
            if bad:
                v = bad[0]
                via = "" if v in RANK_VARS else f" (set from SLURM_NODEID on line {rank_aliases[v]})"
                findings.append(Finding(
                    "DS501", f"--node-rank ${v}{via} is expanded by the batch script's shell before srun starts "
                             f"the tasks: every node gets the first node's rank (0)", line=ln.no,
                    text=body.strip()[:300]))
        many = (nodes or 1) > 1 or (srun_nodes or 1) > 1 or (nnodes or 1) > 1
        if many:
            missing = [f for f in ("--nnodes", "--dist-init-addr") if _flag(words, f) is None]
            if missing:
                findings.append(Finding("DS502", f"the multi-node launch has no {' and no '.join(missing)}",
                                        line=ln.no, text=body.strip()[:300]))
        addr = _resolve(_flag(words, "--dist-init-addr"), assigned)
        port = _int(_flag(words, "--port")) or DEFAULT_PORT
        if addr and ":" in addr:
            dport = addr.rsplit(":", 1)[1].strip("\"'")
            if dport.isdigit() and int(dport) == port:
                findings.append(Finding("DS503", f"--dist-init-addr port {dport} is also the server's HTTP port "
                                                 f"(--port {port}{'' if _flag(words, '--port') else ', the default'}): "
                                                 f"node 0 cannot bind both", line=ln.no, text=body.strip()[:300]))
        want = srun_nodes or nodes
        if nnodes is not None and want is not None and nnodes != want:
            src = "srun --nodes" if srun_nodes else "#SBATCH --nodes"
            findings.append(Finding("DS504", f"{src}={want} but --nnodes {nnodes}: "
                                             + ("the server waits for nodes that never come" if nnodes > want
                                                else "nodes beyond --nnodes start servers of their own"),
                                    line=ln.no, text=body.strip()[:300]))
    if not launches:
        findings.append(Finding("DS502", "no sglang launch (python -m sglang.launch_server) found in the script"))
    dead = forced_verdict(findings, "preflight") == "dead"  # the policy is configs/findings.toml's
    return {"findings": [f.to_json() for f in findings], "nodes": nodes, "launches": len(launches),
            "verdict": "dead" if dead else "ok", "exit_code": 1 if dead else 0}

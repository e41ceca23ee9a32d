"""The check of a user's own sbatch script (`dynspec preflight --sbatch FILE`), before it is submitted.

SGLang's multi-node Slurm recipe (docs/references/multi_node_deployment/multi_node.md) runs
`srun ... python3 -m sglang.launch_server ... --node-rank "$SLURM_NODEID"` in the batch script. The
batch script's shell expands `$SLURM_NODEID` once, on the first node, before srun starts any task:
every node gets rank 0 and the servers hang at distributed init. Reading it in each task's own shell
(`srun bash -c '... --node-rank $SLURM_NODEID'`, or a per-task script) gives 0, 1, ...

Where a launch can sit: a line of the batch script; a variable the script sets (`CMD="python -m
sglang.launch_server ... --node-rank $SLURM_NODEID"` then `srun $CMD`: the batch shell expands the
rank when it sets CMD); a node script written by a heredoc (unquoted `<<EOF`: the batch shell
expands every `$` of the body when it writes the file; quoted `<<'EOF'`: the task's shell does).
Options may come from variables and arrays (`$DIST_OPTS`, `"${ARGS[@]}"`): their assignments are
read too. Which engines and flags: configs/sbatch.toml (sglang and vLLM launches).

Findings (configs/findings.toml): DS501 rank expanded by the batch shell; DS502 --nnodes or
--dist-init-addr missing on a multi-node sglang launch; DS503 the rendezvous port is the server's
HTTP port; DS504 the node count asked of Slurm differs from --nnodes; DS505 a `$` in an #SBATCH
directive (sbatch reads directives as written). A script with no server launch dynspec can read
(the launch is in another script it calls, or it runs no server) is `unknown`, exit 3: no finding.
The script is read, never run."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from dynspec_cli.knowledge.findings import Finding, forced_verdict

from dynspec_cli.resources import tomllib

SRUN = re.compile(r"(^|[\s;&|(`$])srun(\s|$)")
HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(\\?)(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\3")
ASSIGN = re.compile(r"^(?:(?:export|local|readonly|declare(?:\s+-\w+)*)\s+)?([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
PRINTS = ("echo", "printf", "cat")  # lines that show a command instead of running it


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    from dynspec_cli.knowledge.tables import configs_dir

    return tomllib.loads((configs_dir() / "sbatch.toml").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _launcher_res() -> dict[str, re.Pattern]:
    return {eng: re.compile(r"(?:^|[\s/'\"=;(])(?:" + "|".join(re.escape(x) for x in spec["launchers"])
                            + r")(?![\w.-])") for eng, spec in table()["engines"].items()}


def engine_of(text: str) -> Optional[str]:
    for eng, rx in _launcher_res().items():
        if rx.search(text):
            return eng
    return None


@dataclass
class Line:
    no: int  # first physical line of the logical line
    text: str  # continuation lines joined


@dataclass
class Launch:
    no: int
    text: str  # the command line as written (or the variable's value)
    engine: str
    under_srun: bool
    mode: str  # batch: the batch shell expands it as shell code; heredoc: every `$` is the batch shell's
    #           (an unquoted heredoc's body); literal: the task's own shell reads it (a quoted heredoc)
    srun_nodes: Optional[int] = None
    context: str = ""  # for a command kept in a variable: the line that runs it (more options may be there)


def logical_lines(lines: list[tuple[int, str]]) -> list[Line]:
    """Shell logical lines: backslash continuations and quoted strings spanning lines joined."""
    out, buf, start, q = [], [], 0, None
    for i, raw in lines:
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


@dataclass
class Heredoc:
    no: int
    head: str  # the line that starts it (`cat > "$DIR/node.sh" <<EOF`)
    quoted: bool  # <<'EOF' / <<"EOF" / <<\EOF: the body is written as it stands
    body: list[Line]


def split_heredocs(text: str) -> tuple[list[tuple[int, str]], list[Heredoc]]:
    """The batch script's own lines, and the heredoc bodies (which are data until something runs them)."""
    raw = text.splitlines()
    own: list[tuple[int, str]] = []
    docs: list[Heredoc] = []
    i = 0
    while i < len(raw):
        line = raw[i]
        own.append((i + 1, line))
        i += 1
        m = None if line.lstrip().startswith("#") else HEREDOC.search(_strip_comment(line))
        if m is None:
            continue
        dash, word = m.group(1) == "-", m.group(4)
        body = []
        while i < len(raw) and (raw[i].lstrip("\t") if dash else raw[i]) != word:
            body.append((i + 1, raw[i]))
            i += 1
        i += 1  # the delimiter
        docs.append(Heredoc(own[-1][0], line, bool(m.group(2) or m.group(3)), logical_lines(body)))
    return own, docs


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


def heredoc_expanded(s: str) -> list[tuple[int, str]]:
    """In an unquoted heredoc's body quotes are data: every `$NAME` not escaped is expanded."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"(?<!\\)\$\{?([A-Za-z_][A-Za-z0-9_]*)", s)]


def _expanded(launch: Launch, s: str) -> list[tuple[int, str]]:
    return {"batch": batch_expanded, "heredoc": heredoc_expanded}.get(launch.mode, lambda _: [])(s)


def _words(s: str) -> list[str]:
    """Shell words; a quoted word holding a command (`bash -c '... --nnodes 2 ...'`) is split again,
    so the server's flags are seen wherever they are expanded."""
    try:
        words = shlex.split(s, comments=True)
    except ValueError:
        words = s.split()
    out: list[str] = []
    for w in words:
        if " " in w and w != s:
            out += _words(w)
        else:
            out.append(w)
    return out


def _value_words(rhs: str) -> list[str]:
    """The words a variable's value gives where it is expanded (an array's elements, or the
    value split at blanks)."""
    rhs = rhs.strip()
    if rhs.startswith("(") and rhs.endswith(")"):
        rhs = rhs[1:-1]
    return _words(rhs)


def _flag(words: list[str], name: str) -> Optional[str]:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def _resolve(v: Optional[str], scalars: dict[str, str]) -> Optional[str]:
    """`$NAME` / `${NAME}` replaced by the batch script's own assignment of NAME, when it has one."""
    if v is None:
        return None
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: scalars.get(m.group(1), m.group(0)), v)


def _int(v: Optional[str]) -> Optional[int]:
    if v is None:
        return None
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", v.strip())
    if not m:
        return None
    return int(m.group(2) or m.group(1)) if m.group(2) is None or m.group(1) == m.group(2) else None


class Script:
    """What the checks read of the script: directives, assignments, launches."""

    def __init__(self, text: str):
        own, self.heredocs = split_heredocs(text)
        self.lines = logical_lines(own)
        self.directives: list[tuple[int, str]] = []
        self.assigned: dict[str, list[tuple[int, str]]] = {}  # every assignment of a name (any branch)
        self.scalars: dict[str, str] = {}  # the last simple value (to read HEAD:PORT, --nnodes $N)
        self.rank_vars = set(table()["rank_vars"])
        self.aliases: dict[str, int] = {}  # variables set from the batch shell's SLURM_NODEID
        self.launches: list[Launch] = []
        body_lines = []
        for ln in self.lines:
            s = ln.text.strip()
            if s.startswith("#SBATCH"):
                self.directives.append((ln.no, s[len("#SBATCH"):].strip()))
                continue
            body = _strip_comment(s).strip()
            if not body:
                continue
            body_lines.append(Line(ln.no, body))
            m = ASSIGN.match(body)
            if m:
                name, rhs = m.group(1), m.group(2)
                self.assigned.setdefault(name, []).append((ln.no, rhs))
                if any(v in self.rank_vars or v in self.aliases for _, v in batch_expanded(rhs)):
                    self.aliases[name] = ln.no
                vw = _value_words(rhs)
                self.scalars[name] = _resolve(vw[0] if vw else "", self.scalars)
        for i, ln in enumerate(body_lines):
            eng = engine_of(ln.text)
            if eng is None or ln.text.split()[0] in PRINTS:
                continue
            m = ASSIGN.match(ln.text)
            if m:  # a command kept in a variable: run where the variable is expanded under srun
                ref = re.compile(r"\$\{?" + m.group(1) + r"\b")
                runs = [x.text for x in body_lines[i + 1:] if SRUN.search(x.text) and ref.search(x.text)]
                self.launches.append(Launch(ln.no, m.group(2), eng, bool(runs), "batch", context=" ".join(runs)))
                continue
            before = ln.text[:_launcher_res()[eng].search(ln.text).start() + 1]
            srun = bool(SRUN.search(before))
            nodes = _int(_flag(_words(before), "--nodes") or _flag(_words(before), "-N")) if srun else None
            self.launches.append(Launch(ln.no, ln.text, eng, srun, "batch", nodes))
        for doc in self.heredocs:
            for ln in doc.body:
                eng = engine_of(ln.text)
                if eng is not None and ln.text.split()[0] not in PRINTS:
                    self.launches.append(Launch(ln.no, ln.text, eng, self._run_under_srun(doc, body_lines),
                                                "literal" if doc.quoted else "heredoc"))

    @staticmethod
    def _run_under_srun(doc: Heredoc, lines: list[Line]) -> bool:
        """Whether the file the heredoc writes (or the command it feeds) is run by srun."""
        head = doc.head[:doc.head.find("<<")]
        if SRUN.search(head):
            return True
        m = re.search(r">\s*(\S+)\s*$", head) or re.search(r">\s*(\S+)", head)
        if m is None:
            return False
        target = m.group(1).strip("\"'")
        name = target.rsplit("/", 1)[-1]
        return any(SRUN.search(x.text) and (name in x.text or target in x.text) for x in lines if x.no > doc.no)

    @property
    def nodes(self) -> Optional[int]:
        words = [w for _, d in self.directives for w in _words(d)]
        return _int(_flag(words, "--nodes") or _flag(words, "-N"))

    def words(self, launch: Launch, depth: int = 3) -> list[str]:
        """The launch's words with the variables it expands replaced by their assigned values."""
        text = f"{launch.text} {launch.context}"
        out = _words(launch.text) + _words(launch.context)
        seen: set[str] = set()
        todo = [v for _, v in (heredoc_expanded(text) if launch.mode != "batch" else batch_expanded(text))]
        while todo and depth:
            nxt = []
            for v in todo:
                if v in seen or v not in self.assigned:
                    continue
                seen.add(v)
                for _, rhs in self.assigned[v]:
                    out += _value_words(rhs)
                    nxt += [x for _, x in batch_expanded(rhs)]
            todo, depth = nxt, depth - 1
        return out


def _rank_hit(launch: Launch, text: str, flags: list[str], ranks) -> Optional[tuple[str, str]]:
    """(flag, variable): the first rank variable the batch shell expands in a rank flag's value."""
    for flag in flags:
        for m in re.finditer(r"(?:^|[\s'\"])" + re.escape(flag) + r"(?:=|\s+)(\S+)", text):
            hits = [v for p, v in _expanded(launch, text) if m.start(1) <= p < m.end(1) and v in ranks]
            if hits:
                return flag, hits[0]
    return None


def check(text: str) -> dict[str, Any]:
    sc = Script(text)
    findings: list[Finding] = []
    for no, d in sc.directives:
        bad = [w for w in _words(d) if re.search(r"(?<!\\)\$[{(A-Za-z0-9_]", w)]
        if bad:
            findings.append(Finding("DS505", f"#SBATCH {bad[0]}: sbatch reads its directives as written; no shell "
                                             f"expands the $ there", line=no, text=d[:300]))
    nodes = sc.nodes
    for la in sc.launches:
        spec = table()["engines"][la.engine]
        words = sc.words(la)
        shown = la.text.strip()[:300]
        ranks = sc.rank_vars | set(sc.aliases)
        # DS501: the rank value expanded by the batch shell (directly, through a variable it set, or
        # in the heredoc that wrote the node script)
        hit, where = (_rank_hit(la, la.text, spec["rank_flags"], ranks), "") if la.under_srun else (None, "")
        if la.under_srun and hit is None and la.mode == "batch":
            for _, v in batch_expanded(la.text):
                for ano, rhs in sc.assigned.get(v, []):
                    sub = Launch(ano, rhs, la.engine, True, "batch")
                    if (h := _rank_hit(sub, rhs, spec["rank_flags"], ranks)) is not None:
                        hit, where = h, f" (in ${v}, set on line {ano})"
                        break
                if hit:
                    break
        if hit is not None:
            flag, var = hit
            via = f" (set from SLURM_NODEID on line {sc.aliases[var]})" if var in sc.aliases else ""
            when = ("when the batch script writes the node script (an unquoted heredoc)" if la.mode == "heredoc"
                    else "before srun starts the tasks")
            findings.append(Finding(
                "DS501", f"{flag} ${var}{via}{where} is expanded by the batch script's shell {when}: every node "
                         f"gets the first node's rank (0)", line=la.no, text=shown))
        nnodes = _int(_resolve(_flag(words, "--nnodes"), sc.scalars))
        rank_given = any(_flag(words, f) is not None for f in spec["rank_flags"])
        many = ((nnodes or 1) > 1 or (la.srun_nodes or 1) > 1
                or (la.under_srun and la.srun_nodes is None and (nodes or 1) > 1) or rank_given
                or any(_flag(words, f) is not None for f in spec["rendezvous"]))
        missing = [f for f in spec["rendezvous"] if _flag(words, f) is None]
        if many and missing:
            findings.append(Finding("DS502", f"the multi-node launch has no {' and no '.join(missing)}",
                                    line=la.no, text=shown))
        if spec.get("dist_init_flag"):
            addr = _resolve(_flag(words, spec["dist_init_flag"]), sc.scalars)
            port = _int(_resolve(_flag(words, "--port"), sc.scalars)) or spec["default_port"]
            if addr and ":" in addr:
                dport = addr.rsplit(":", 1)[1].strip("\"'")
                if dport.isdigit() and int(dport) == port:
                    given = "" if _flag(words, "--port") else ", the default"
                    findings.append(Finding("DS503", f"--dist-init-addr port {dport} is also the server's HTTP port "
                                                     f"(--port {port}{given}): node 0 cannot bind both",
                                            line=la.no, text=shown))
        want = la.srun_nodes or nodes
        if nnodes is not None and want is not None and nnodes != want:
            src = "srun --nodes" if la.srun_nodes else "#SBATCH --nodes"
            findings.append(Finding("DS504", f"{src}={want} but --nnodes {nnodes}: "
                                             + ("the server waits for nodes that never come" if nnodes > want
                                                else "nodes beyond --nnodes start servers of their own"),
                                    line=la.no, text=shown))
    engines = sorted({la.engine for la in sc.launches})
    res = {"findings": [f.to_json() for f in findings], "nodes": nodes, "launches": len(sc.launches),
           "engines": engines, "note": None}
    if forced_verdict(findings, "preflight") == "dead":  # the policy is configs/findings.toml's
        return {**res, "verdict": "dead", "exit_code": 1}
    if not sc.launches:
        return {**res, "verdict": "unknown", "exit_code": 3,
                "note": "no sglang or vLLM server launch in the script (one in a script it calls is not read)"}
    return {**res, "verdict": "ok", "exit_code": 0}


def unreadable(path: str, why: str) -> dict[str, Any]:
    """A script that cannot be read: unknown, never a finding."""
    return {"findings": [], "nodes": None, "launches": 0, "engines": [], "verdict": "unknown", "exit_code": 3,
            "note": f"cannot read the script: {why}"}

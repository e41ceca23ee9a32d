"""Mine every published sglang wheel for log calls that say a speculative or overlap option is
disabled, ignored, removed, overridden or falling back.

    python -m tests.tools.mine_downgrades                 # all releases of releases.toml, a summary
    python -m tests.tools.mine_downgrades 0.5.23 --all    # one release, every call with its condition
    python -m tests.tools.mine_downgrades --unhandled     # only calls no data file accounts for

Wheels come from tests/support/wheels.py (`pip download --no-deps`, unzipped, cached in
~/.cache/dynspec-tests); the source is read with `ast`, sglang is never imported. A call found
here must be accounted for by a row of configs/sglang/warnings.toml (what the line proves), a
`dead_when` pattern of a feature in configs/features/ (the line kills that feature), or a row of
configs/sglang/warnings_reviewed.toml (read and judged irrelevant, with the reason);
tests/knowledge/test_downgrades_mined.py fails on any other, so a new release cannot add an
unhandled downgrade silently. Results per release are cached beside the wheels, keyed by this
file's text.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional

if __package__ in (None, ""):  # run as a file: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgspec  # noqa: E402

from dynspec_cli.knowledge.tables import load_toml  # noqa: E402
from tests.support import wheels  # noqa: E402

SEARCHED = ("sglang/srt/", "sglang/launch_server.py", "sglang/cli/")  # what a server runs
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "exception", "warning_once", "info_once"}
LOG_FUNCS = {"print", "warn", "print_warning_once", "log_info_on_rank0", "print_info_once", "logger_warning_once"}
# What the message is about: a speculative or overlap option.
TOPIC = re.compile(r"specul|\bspec\b|spec[ _]?v[12]|eagle|draft|overlap|ngram|dflash|mtp|standalone|adaptive", re.I)
TOPIC_BYTES = re.compile(TOPIC.pattern.encode())  # on lower-cased bytes
# What happens to it: disabled, ignored, removed, overridden, falling back (and the words sglang
# uses for the same: turned off, reset to, forced, no longer, not implemented, "X is used because").
DOWNGRADE = re.compile(r"disabl|ignor|remov|overrid|fall(?:ing|s)? ?back|fallback|turn(?:ed|ing)? off|reset to"
                       r"|\bforc(?:e|ed|ing)\b|no longer|deprecat|not implemented|(?:is|are) used\b.{0,80}\bbecause", re.I)
PREFILTER = re.compile(rb"disabl|ignor|remov|overrid|fall|turn|reset|forc|no longer|deprecat|not implemented|because")  # on lower-cased bytes
DOWNGRADE_BYTES = re.compile(DOWNGRADE.pattern.encode())  # on lower-cased bytes
FIELD = "{}"
_PERCENT = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfgixX]")


@dataclass(frozen=True)
class Call:
    file: str  # inside the wheel, e.g. sglang/srt/server_args.py
    line: int
    func: str  # logger.warning, warnings.warn, print, ...
    text: str  # the message with each formatted value as {source}
    template: str  # the message with each formatted value as {}
    condition: Optional[str]  # the enclosing `if` tests, innermost last, joined by " and "


def message(node: ast.AST, names: dict[str, ast.AST]) -> Optional[tuple[str, str]]:
    """(text, template) of a message expression: literals, f-strings, `+` of them, `%`/`.format`
    on a literal (arguments left as fields), a local name assigned one of those."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        text, tmpl = [], []
        for v in node.values:
            if isinstance(v, ast.Constant):
                text.append(v.value)
                tmpl.append(v.value.replace("{", "{{").replace("}", "}}"))
            else:
                text.append("{" + ast.unparse(v.value) + "}")
                tmpl.append(FIELD)
        return "".join(text), "".join(tmpl)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = message(node.left, names), message(node.right, names)
        if a or b:
            a = a or ("{" + ast.unparse(node.left) + "}", FIELD)
            b = b or ("{" + ast.unparse(node.right) + "}", FIELD)
            return a[0] + b[0], a[1] + b[1]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        a = message(node.left, names)
        return (a[0], _PERCENT.sub(FIELD, a[1])) if a else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        a = message(node.func.value, names)
        return (a[0], re.sub(r"\{[^{}]*\}", FIELD, a[0])) if a else None
    if isinstance(node, ast.Name) and node.id in names:
        return message(names[node.id], {})
    return None


def _func_name(call: ast.Call) -> Optional[str]:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in LOG_METHODS:
        return ast.unparse(f)
    if isinstance(f, ast.Attribute) and f.attr == "warn" and ast.unparse(f.value) == "warnings":
        return "warnings.warn"
    if isinstance(f, ast.Name) and f.id in LOG_FUNCS:
        return f.id
    return None


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}


def _conditions(node: ast.AST, parents: dict) -> list[str]:
    """The tests of the `if`s around `node`, outermost first (`not (...)` in an else branch)."""
    out = []
    while node in parents:
        up = parents[node]
        if isinstance(up, ast.If) and node is not up.test:
            test = ast.unparse(up.test)
            if node in up.body:
                out.append(test)
            elif not (isinstance(node, ast.If) and up.orelse == [node]):  # an elif: its own test says it
                out.append(f"not ({test})")
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        node = up
    return out[::-1]


def _local_names(node: ast.AST, parents: dict) -> dict[str, ast.AST]:
    """Names assigned in the function around `node` (a message is often built in a variable)."""
    while node in parents and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node = parents[node]
    names: dict[str, ast.AST] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            names.setdefault(n.targets[0].id, n.value)
    return names


def _near(low: bytes, reach: int = 400) -> bool:
    """A downgrade word with a topic word close by: only such files are parsed (parsing is what
    costs; most files that say "disable" say nothing speculative near it)."""
    return any(TOPIC_BYTES.search(low, max(0, m.start() - reach), m.end() + reach) for m in DOWNGRADE_BYTES.finditer(low))


_SEEN: dict[tuple[str, bytes], list[Call]] = {}  # (file, sha1 of its text) -> calls: releases share most files


def calls_in_source(rel: str, source: bytes) -> list[Call]:
    """Every logging call in one file whose message is about a speculative/overlap option being
    downgraded."""
    low = source.lower()
    if not (PREFILTER.search(low) and TOPIC_BYTES.search(low) and _near(low)):
        return []
    key = (rel, hashlib.sha1(source).digest())
    if key not in _SEEN:
        _SEEN[key] = _calls_in_source(rel, source)
    return _SEEN[key]


def _calls_in_source(rel: str, source: bytes) -> list[Call]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out, parents = [], None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or (func := _func_name(node)) is None:
            continue
        for arg in node.args[:3]:
            if isinstance(arg, ast.Name):
                parents = parents or _parents(tree)
                m = message(arg, _local_names(node, parents))
            else:
                m = message(arg, {})
            if m is None:
                continue
            text, tmpl = m
            if len(node.args) > 1 and func != "print":  # logger.x("... %s", value): lazy %-formatting
                tmpl = _PERCENT.sub(FIELD, tmpl)
            if TOPIC.search(text) and DOWNGRADE.search(text):
                parents = parents or _parents(tree)
                conds = _conditions(node, parents)
                out.append(Call(rel, node.lineno, func, text, tmpl, " and ".join(conds) or None))
            break
    return sorted(out, key=lambda c: c.line)


def _key() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def mine(version: str) -> list[Call]:
    """Every such call in one release (cached on disk)."""
    cache = wheels.CACHE / "downgrades" / f"{version}-{_key()}.json"
    if cache.is_file():
        return [Call(**c) for c in json.loads(cache.read_text())]
    root = wheels.unpacked(version)
    out: list[Call] = []
    for p in sorted((root / "sglang").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(SEARCHED):
            out += calls_in_source(rel, p.read_bytes())
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([asdict(c) for c in out]))
    tmp.replace(cache)
    return out


# --- accounting: which data row covers a call ---------------------------------------------
REVIEWED = Path(__file__).resolve().parents[2] / "configs" / "sglang" / "warnings_reviewed.toml"


class Reviewed(msgspec.Struct, forbid_unknown_fields=True):
    file: str
    text: str
    reason: str
    seen: str = ""  # the releases the call was found in when it was reviewed (information only)


class ReviewedFile(msgspec.Struct, forbid_unknown_fields=True):
    reviewed: list[Reviewed] = []


def reviewed_calls() -> list[Reviewed]:
    return load_toml(REVIEWED, ReviewedFile).reviewed


def template_regex(template: str) -> re.Pattern:
    """A regex matching every message `template` can produce ({} = any text)."""
    parts = re.split(r"(?<!\{)\{\}(?!\})", template)
    return re.compile(".+?".join(re.escape(p.replace("{{", "{").replace("}}", "}")) for p in parts), re.S)


def sample(template: str) -> str:
    """One message the template can produce (each field as 7)."""
    return re.sub(r"(?<!\{)\{\}(?!\})", "7", template).replace("{{", "{").replace("}}", "}")


def accounted_by(version: str, call: Call, k=None, reviewed=None, feats=None) -> Optional[str]:
    """'warnings.toml:<id>', 'feature:<name>' or 'reviewed:<n>' for the row that accounts for
    the call in `version`; None when none does."""
    from dynspec_cli.knowledge import features
    from dynspec_cli.engines.sglang.knowledge import knowledge

    k = k or knowledge()
    reviewed = reviewed if reviewed is not None else reviewed_calls()
    feats = feats if feats is not None else [features.load_feature(n) for n in features.available()]
    msg = sample(call.template)
    bit = k.mask_of(version)
    for w, rx in k.warning_matchers:
        if not k.mask(w.versions) & bit:
            continue
        if rx.search(msg) if rx is not None else w.text.rstrip() in msg:  # rows are substrings of the line
            return f"warnings.toml:{w.id}"
    for f in feats:
        for d in getattr(f, "dead_when", []):
            if d.literal in call.text and re.search(d.pattern, msg):
                return f"feature:{f.name}"
    for i, r in enumerate(reviewed):
        if r.file == call.file and r.text == call.text:
            return f"reviewed:{i}"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    from dynspec_cli.engines.sglang.knowledge import knowledge

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", help="releases (default: all of configs/sglang/releases.toml)")
    ap.add_argument("--all", action="store_true", help="print every call with its condition")
    ap.add_argument("--unhandled", action="store_true", help="print only calls no data file accounts for")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    k = knowledge()
    versions = a.versions or k.releases
    rows, totals = [], {"calls": 0, "warnings": 0, "feature": 0, "reviewed": 0, "unhandled": 0}
    for v in versions:
        calls = mine(v)
        counts = {"warnings": 0, "feature": 0, "reviewed": 0, "unhandled": 0}
        for c in calls:
            by = accounted_by(v, c, k)
            kind = by.split(":")[0].replace(".toml", "") if by else "unhandled"
            counts[kind] += 1
            if a.all or (a.unhandled and by is None):
                rows.append({"version": v, **asdict(c), "accounted_by": by})
        totals["calls"] += len(calls)
        for kk, n in counts.items():
            totals[kk] += n
        if not a.json:
            print(f"{v:14} {len(calls):3} calls: {counts['warnings']:3} warnings.toml, {counts['feature']:2} feature, "
                  f"{counts['reviewed']:3} reviewed, {counts['unhandled']:3} unhandled")
    if a.json:
        print(json.dumps({"totals": totals, "calls": rows}, indent=1))
        return 0
    for r in rows:
        print(f"\n{r['version']} {r['file']}:{r['line']} {r['func']}  [{r['accounted_by'] or 'UNHANDLED'}]\n"
              f"    {r['text']!r}\n    if {r['condition']}")
    print(f"\ntotal {totals}")
    return 1 if totals["unhandled"] else 0


if __name__ == "__main__":
    sys.exit(main())

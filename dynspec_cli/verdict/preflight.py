"""What every engine's preflight shares (engines/<name>/preflight.py): its bad-input errors, reading
the inspector's one JSON document, the order of its findings and the registry's preflight policy
(configs/findings.toml, context `preflight`: a dead finding makes the verdict dead).

Preflight's verdicts and exit codes (verdict/codes.py): reachable 0, dead 1, unknown 3, ineffective 5."""
from __future__ import annotations

import json
from typing import Any

from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.verdict.core import ordered


class InputError(Exception):
    """Bad input to a preflight: one line, exit 2 (cli/errors.py)."""


class InterpreterError(InputError):
    """The `python` preflight was given cannot be run on the host."""


class PatchError(InputError):
    """The `--patch` diff does not describe the installed engine."""


def facts_of(res, python: str) -> dict[str, Any]:
    """The inspector's document from a finished run of it (its stdout), or one saying why there is none."""
    try:
        return json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"ok": False, "error": f"{python} did not run the inspector: {err[-1] if err else f'exit {res.exit_code}'}"}


def judged(p: Any, steps) -> bool:
    """Run an engine's preflight steps over one preflight in the making (`p`, with a `verdict`
    attribute) until one settles the verdict early; True when one did."""
    for step in steps:
        step(p)
        if p.verdict is not None:
            return True
    return False


def decided(findings: list[Finding], otherwise: str) -> str:
    """dead when a finding's preflight effect says so, else `otherwise`."""
    return "dead" if forced_verdict(findings, "preflight") == "dead" else otherwise


def check_diff(diff: dict[str, Any], name: str, version, package_dir, *, plugin: bool = False) -> None:
    """Refuse (PatchError: one line, exit 2) a --patch that does not describe the installed package
    `name` (the inspector's `diff`, inject/inspector_common.py analyse_diff): a file outside the
    package, a file this release lacks, a hunk whose text is not there (another release or
    checkout), a hunk still not applied. With a plugin feature, files outside the package are the
    plugin's own."""
    if not diff.get("given"):
        return
    release = f"{name} {version or '?'} at {package_dir}"
    if diff.get("parse_errors"):
        raise PatchError(f"--patch: {diff['parse_errors'][0]}")
    files = diff.get("files") or []
    outside = [f for f in files if not f.get("installed_path")]
    if outside and not plugin:
        raise PatchError(f"--patch: {outside[0].get('diff_path')!r} is not a file of the {name} package ({release}): "
                         f"preflight judges a diff of {name}'s own files (as `git diff` in a checkout of {name} writes it)")
    engine = [f for f in files if f.get("installed_path")]
    hunks_ = [(f, h) for f in engine for h in f.get("hunks") or []]
    missing = [f for f in engine if not f.get("present") and not f.get("deleted")]
    differs = [(f, h) for f, h in hunks_ if h.get("applied") == "differs"]
    if missing and not missing[0].get("new_file"):
        f = missing[0]
        raise PatchError(f"--patch: {f['diff_path']}: no such file in {release}: the diff was made against another "
                         f"{name} release or checkout")
    applied = [h for _, h in hunks_ if h.get("applied") in ("exact", "offset")]
    if differs and not applied and len(hunks_) > 1:  # not one hunk's text is here: another release's diff
        f, h = differs[0]
        raise PatchError(f"--patch: none of its {len(hunks_)} hunks matches {release} ({len(differs)} match neither "
                         f"side, first {h['header']} in {f['diff_path']}{_mismatch(h)}): the diff was made against "
                         f"another {name} release or checkout")
    if differs:
        f, h = differs[0]
        raise PatchError(f"--patch: hunk {h['header']} does not apply to {f['installed_path']}{_mismatch(h)}: "
                         f"neither its new text nor its old text is in {release}")
    if missing:  # a file the diff creates, not in this install
        raise PatchError(f"--patch: {missing[0]['diff_path']} (a file the diff creates) is not in {release}: "
                         "the patch is not applied to this install")
    for f, h in hunks_:
        if h.get("applied") == "not-applied":
            raise PatchError(f"--patch: hunk {h['header']} is not applied to {f['installed_path']} (it still has the "
                             "old text): apply the patch to this install first, or give the diff of what is installed")


def _mismatch(h: dict) -> str:
    m = h.get("mismatch")
    if not m:
        return ""
    have = "end of file" if m.get("installed") is None else repr(m["installed"].strip())
    return f"; line {m['line']}: the diff has {m['diff'].strip()!r}, the installed file {have}"


__all__ = ["check_diff", "InputError", "InterpreterError", "PatchError", "facts_of", "judged", "decided", "ordered"]

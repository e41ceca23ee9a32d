"""`verify --patch` for sglang: the diff's hunks mapped onto the sglang this interpreter would
import (found without importing it), parsed and classified by the inspector's own code (one parser,
inspector/diff.py) and hunks.py's roles; what the install does not hold is read from the diff's own
lines (verdict/diffclasses.py)."""
from __future__ import annotations

from typing import Optional

from dynspec_cli.verdict.diffclasses import from_diff


def patched_classes(text: str, marker_literal: str) -> list[str]:
    """The classes of the diff's behaviour hunks, in the diff's order (server_args.py's hunks are
    judged as flags, not as behaviour)."""
    from dynspec_cli.engines.sglang.hunks import in_flag_file

    pkg = _local_package()
    installed = _from_install(text, pkg, marker_literal) if pkg else {}
    return from_diff(text, marker_literal, installed,
                     skip=in_flag_file)


def _local_package() -> Optional[str]:
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


def analysed(text: str, literal: str) -> Optional[dict]:
    """The diff mapped onto the sglang this interpreter would import (each hunk's scopes: class,
    function, marker, behaviour), for the log's judge to place each hunk against the worker the log
    shows (hunks.judge); None when no sglang is importable here."""
    pkg = _local_package()
    return _analyse(text, pkg, literal) if pkg else None


def _analyse(text: str, pkg: str, literal: str) -> dict:
    from dynspec_cli.engines.sglang.inspector.diff import analyse_diff, mark_roles
    from dynspec_cli.inject.inspector_common import Source, marker_hits_in

    diff = analyse_diff(text, pkg)
    hits = [h for f in diff["files"] if f.get("present") and str(f["installed_path"]).endswith(".py")
            for h in marker_hits_in(Source.get(f["installed_path"]), literal, None)]
    mark_roles(diff, hits)
    return diff


def _from_install(text: str, pkg: str, literal: str) -> dict[tuple[str, int], list[str]]:
    """(diff path, hunk index) -> behaviour classes, for the hunks the installed files hold."""
    from dynspec_cli.engines.sglang import hunks

    diff = _analyse(text, pkg, literal)
    out = {}
    for f in diff["files"]:
        for i, h in enumerate(f["hunks"]):
            if h.get("applied") not in ("exact", "offset") or not h.get("scopes"):
                continue
            out[(f["diff_path"], i)] = [sc["class"] for sc in h["scopes"] if sc.get("class")
                                        and hunks.role(f["diff_path"], sc) in ("behaviour", "marker+behaviour")]
    return out

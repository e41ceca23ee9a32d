"""The shared inspector module, as this program finds it, and the words of its facts in this
inspector's document (`file` relative to the site directory, `class`, `function`)."""
import os
import re

try:  # bundled by inject.program(): the shared module travels beside these modules
    from . import inspector_common as shared
except ImportError:  # run in place from dynspec's tree (tests)
    from dynspec_cli.inject import inspector_common as shared

SCHEMA = "dynspec-vllm-inspector/1"
MRO_LIMIT = 12  # bases followed, at most


def pattern_of(pattern):
    try:
        return re.compile(pattern) if pattern else None
    except re.error:
        return None


def worded(hits, site):
    """The shared scan's hits as this document's: [{file (relative to site), line, class, function,
    pattern_matches}] for string constants and f-strings; one `syntax_error` entry for a file that
    holds the literal and does not parse."""
    out, broken = [], set()
    for h in hits:
        rel = os.path.relpath(h["file"], site)
        if h["kind"] == "syntax-error-file":
            if rel not in broken:
                broken.add(rel)
                out.append({"file": rel, "line": None, "class": None, "function": None, "syntax_error": True})
        elif h["kind"] in ("str", "fstring"):
            out.append({"file": rel, "line": h["line"], "class": h["class"], "function": h["function"],
                        "pattern_matches": h["pattern_matches"]})
    return out


def marker_hits_in(path, site, literal, rx):
    """The marker in one file (a plugin's, a custom proposer's: `site` is its own folder)."""
    try:
        src = shared.Source.get(path)
    except OSError:
        return []
    return worded(shared.marker_hits_in(src, literal, rx), site)


def static_mro(site, module, cls):
    """(file, line, [{class, module (path under site)}]) of a class of `module` (a path under site,
    vllm/...py), its bases followed inside vllm (the shared static MRO); (None, None, []) when the
    class is not there."""
    dotted = module[:-3].replace("/", ".") if module.endswith(".py") else module.replace("/", ".")
    if dotted.endswith(".__init__"):
        dotted = dotted[:-len(".__init__")]
    pkg = os.path.join(site, dotted.split(".")[0])
    found = shared.static_mro(pkg, dotted, cls)["classes"]
    if not found or not found[0]["resolved"]:
        return None, None, []
    out = [{"class": c["name"], "module": os.path.relpath(c["file"], site)} for c in found if c["resolved"]]
    return os.path.join(site, module), found[0]["line"], out[:MRO_LIMIT]

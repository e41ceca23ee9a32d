"""The draft model the server will load: its config.json's `architectures` and `model_type`, read
from --speculative-draft-model-path when it is a directory on this host (a hub id is not fetched)."""
import json
import os

FLAG = "--speculative-draft-model-path"


def draft_path(flags):
    value = None
    for i, f in enumerate(flags):
        if f == FLAG and i + 1 < len(flags):
            value = flags[i + 1]
        elif f.startswith(FLAG + "="):
            value = f[len(FLAG) + 1:]
    return value


def read_draft(flags):
    path = draft_path(flags)
    out = {"path": path, "found": False, "config": None, "architectures": None, "model_type": None, "reason": None}
    if path is None:
        out["reason"] = "no %s" % FLAG
        return out
    cfg = os.path.join(os.path.expanduser(path), "config.json")
    if not os.path.isdir(os.path.expanduser(path)):
        out["reason"] = "not a directory on this host (a hub id is not fetched)"
        return out
    try:
        with open(cfg, "rb") as f:
            doc = json.loads(f.read(1 << 20).decode("utf-8", "replace"))
    except (OSError, ValueError) as e:
        out["reason"] = "%s: %s" % (cfg, e)
        return out
    if not isinstance(doc, dict):
        out["reason"] = "%s is not a JSON object" % cfg
        return out
    arch = doc.get("architectures")
    out.update(found=True, config=cfg, model_type=doc.get("model_type"),
               architectures=[str(a) for a in arch] if isinstance(arch, list) else None)
    return out

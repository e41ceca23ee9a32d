"""Building logs for tests from the exact strings in sglang's source (configs/sglang tables)."""
from __future__ import annotations

from dynspec_cli import engines
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang.knowledge import knowledge
from dynspec_cli.verdict.result import Verdict
from dynspec_cli.verdict.pipeline import judge_bytes


def warning_text(wid: str, reason: str = "") -> str:
    w = knowledge().warning_by_id[wid]
    if w.text is not None:
        return w.text
    return f"Spec v1 is used for eagle/eagle3/standalone speculative decoding because {reason}."


def dump(form: str = "repr", **fields) -> str:
    if form == "repr":
        return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"
    return "server_args={" + ", ".join(f"{k!r}: {v!r}" for k, v in fields.items()) + "}"


def ts(msg: str, tags: str = "", t: str = "2026-02-27 19:49:17") -> str:
    return f"[{t}{' ' + tags if tags else ''}] {msg}"


MARKER = "Dynamic speculation disable enabled: threshold=5"
READY = ts("The server is fired up and ready to roll!")


def judge_text(text: str | bytes, *, patched=None, version=None, feature=None) -> Verdict:
    data = text.encode() if isinstance(text, str) else text
    f = load_feature(feature)
    return judge_bytes(data, f, patched, version, engine=engines.of(f))


def codes(v: Verdict) -> list[str]:
    return [f.code for f in v.findings]

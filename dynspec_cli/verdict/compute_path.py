"""Did decode run on the fast path? The launch's CUDA-graph capture lines (target, draft,
draft-extend) and each `Decode batch` line's `cuda graph: True|False`, by running batch, judged
against the release's settings (configs/sglang/cuda_graph.toml). The verdict (live / dead) does not
depend on it: a live patch measured on eager decode is still live, but its benchmark measures
something else than the user configured."""
from __future__ import annotations

from typing import Any, Callable, Optional

from dynspec_cli.knowledge.sglang import Knowledge
from dynspec_cli.knowledge.tables import GraphSettings
from dynspec_cli.verdict.launch import Launch

ROLES = ("target", "draft", "draft-extend")


def disabled_by(k: Knowledge, settings: Optional[GraphSettings], dump: dict[str, Any]) -> Optional[tuple[str, Any]]:
    """(field, value) of the server_args that switch decode graphs off, or None. Without a known
    release every release's fields count (no name changed its meaning)."""
    fields: dict[str, Any] = {}
    for r in [settings] if settings is not None else k.graph_settings_rows:
        fields.update(r.disabled)
    for name, value in fields.items():
        if name in dump and dump[name] == value:
            return name, value
    return None


def captured_max(la: Launch, settings: Optional[GraphSettings]) -> tuple[Optional[int], Optional[list[int]], Optional[str]]:
    """(largest captured batch size, the sizes, where that comes from): the capture line's list
    first (what the runner really captured), then server_args."""
    bs = la.graphs.bs.get("target")
    if bs:
        line = la.graphs.lines.get("target")
        return max(bs), bs, "the capture line" + (f" (line {line.no})" if line is not None and line.no else "")
    dump = la.config.dump
    names = [(settings.bs_field, settings.max_bs_field)] if settings is not None else [
        ("cuda_graph_bs", "cuda_graph_max_bs"), ("cuda_graph_bs_decode", "cuda_graph_max_bs_decode")]
    for bs_field, max_field in names:
        listed = dump.get(bs_field)
        if isinstance(listed, list) and listed and all(isinstance(x, int) for x in listed):
            return max(listed), listed, f"server_args {bs_field}"
        if isinstance(dump.get(max_field), int):
            return dump[max_field], None, f"server_args {max_field}"
    return None, None, None


def judge(k: Knowledge, la: Launch, mask: int, add: Callable[..., None], *, speculative: bool) -> dict[str, Any]:
    """The launch's compute_path section; its findings go to `add` (Judging.add)."""
    settings = k.graph_settings(mask) if mask else None
    dump = la.config.dump
    graphs, dec = la.graphs, la.decoding
    # "not captured" needs the start-up on record: the server_args line and the ready line, with
    # capture (which comes between them) absent
    startup_seen = la.config.dump_line is not None and la.life.ready is not None

    def captured(role: str) -> Optional[bool]:
        if role in graphs.lines:
            return True
        if role != "target" and not speculative:
            return None
        return False if startup_seen else None

    off = disabled_by(k, settings, dump)
    target = captured("target")
    # server_args still lists the sizes when graphs are off or were never captured: nothing was
    top, bs, basis = captured_max(la, settings) if off is None and target is not False else (None, None, None)
    eager = {b: c[1] for b, c in sorted(dec.graph_by_batch.items()) if c[1]}
    in_graph = {b: c[0] for b, c in sorted(dec.graph_by_batch.items()) if c[0]}
    draft_tokens = dump.get("speculative_num_draft_tokens") if speculative else None
    doc = {
        "target_captured": target,
        "draft_captured": captured("draft"),
        "draft_extend_captured": captured("draft-extend"),
        "graphs_disabled": (off is not None) if off is not None or dump else None,
        "captured_bs": bs,
        "captured_max_bs": top,
        "captured_max_bs_basis": basis,
        "tokens_per_request_in_verify": draft_tokens if isinstance(draft_tokens, int) else None,
        "graph_batches": {str(b): n for b, n in in_graph.items()},
        "eager_batches": {str(b): n for b, n in eager.items()},
    }
    if off is not None:
        field, value = off
        lines = sum(eager.values())
        add("DS317", f"server_args has {field}={value!r}: decode runs eager on every batch"
                     + (f" ({lines} Decode batch line(s) say cuda graph: False)." if lines else "."),
            line=la.config.dump_line, text=False,
            fix=_disable_fix(settings))
        return doc
    if not eager or not (graphs.lines.get("target") or dump.get(settings.max_bs_field if settings else "cuda_graph_max_bs")):
        return doc  # nothing ran eager, or nothing says graphs were there to run in
    above = [b for b in eager if top is not None and b > top]
    within = [b for b in eager if top is None or b <= top]
    parts = []
    if above:
        parts.append(f"at running batch {_sizes(above)}, above the largest captured batch size {top} ({basis})")
    if within:
        parts.append(f"at running batch {_sizes(within)}" + (f", within the captured sizes (up to {top})" if top is not None else ""))
    lines = sum(eager.values())
    verify = (f" With speculation each request's verify feeds {draft_tokens} tokens, so the graph of batch size {top} "
              f"holds {top * draft_tokens} tokens; the limit is still {top} running requests.") if (
        isinstance(draft_tokens, int) and top is not None and above) else ""
    add("DS316", f"CUDA graphs were captured but {lines} Decode batch line(s) ran eager (cuda graph: False) "
                 + "; ".join(parts) + "." + verify,
        line=dec.eager_line, fix=_eager_fix(settings, top, max(eager), above, la))
    return doc


def _sizes(vals: list[int]) -> str:
    return ", ".join(map(str, vals)) if len(vals) <= 6 else f"{vals[0]}–{vals[-1]} ({len(vals)} sizes)"


def _eager_fix(settings: Optional[GraphSettings], top: Optional[int], worst: int, above: list[int], la: Launch) -> str:
    flag = settings.max_bs_flag if settings is not None else "--cuda-graph-max-bs (0.5.14+: --cuda-graph-max-bs-decode)"
    if above:
        cap = la.config.max_running
        want = max(worst, cap) if isinstance(cap, int) and cap <= 2 * worst else worst
        return (f"Capture graphs for the batches you run: `{flag} {want}` (covers running batch {worst}"
                + (f" and max_running_requests={cap}" if want == cap else "") + f"), or cap the batch at the captured "
                f"size with `--max-running-requests {top}`. More graphs cost GPU memory at start-up.")
    return ("The eager batches are within the captured sizes: a batch that cannot replay a graph (e.g. one that "
            "needs logprobs or mixes prefill) runs eager. Compare with the same load without that feature.")


def _disable_fix(settings: Optional[GraphSettings]) -> str:
    flag = settings.disable_flag if settings is not None else "--disable-cuda-graph (0.5.14+: --cuda-graph-backend-decode disabled)"
    return (f"Drop `{flag}` to benchmark the CUDA-graph decode path; keep it only if eager decode is what "
            f"you mean to measure (or sglang disabled graphs itself: its warning at start-up says why).")

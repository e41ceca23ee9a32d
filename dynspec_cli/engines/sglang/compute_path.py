"""Did decode run on the fast path? The launch's CUDA-graph capture lines (target, draft,
draft-extend) and each `Decode batch` line's `cuda graph: True|False`, by running batch, judged
against the release's settings (configs/sglang/cuda_graph.toml). The verdict (live / dead) does not
depend on it: a live patch measured on eager decode is still live, but its benchmark measures
something else than the user configured."""
from __future__ import annotations

from typing import Any, Callable, Optional

from dynspec_cli.engines.sglang.knowledge import Knowledge
from dynspec_cli.knowledge.tables import GraphSettings
from dynspec_cli.engines.sglang.launch import Launch

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
        return max(bs), bs, "the capture line" + (f" at line {line.no}" if line is not None and line.no else "")
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
    if above:
        cap = la.config.max_running
        want = max(worst, cap) if isinstance(cap, int) and cap <= 2 * worst else worst
        flag = f"`{settings.max_bs_flag} {want}`" if settings is not None else \
            f"`--cuda-graph-max-bs {want}` (0.5.14+: `--cuda-graph-max-bs-decode {want}`)"
        return (f"Capture graphs for the batches you run: {flag} (covers running batch {worst}"
                + (f" and max_running_requests={cap}" if want == cap else "") + f"), or cap the batch at the captured "
                f"size with `--max-running-requests {top}`. More graphs cost GPU memory at start-up.")
    return ("The eager batches are within the captured sizes: a batch that cannot replay a graph (e.g. one that "
            "needs logprobs or mixes prefill) runs eager. Compare with the same load without that feature.")


def _disable_fix(settings: Optional[GraphSettings]) -> str:
    flag = settings.disable_flag if settings is not None else "--disable-cuda-graph (0.5.14+: --cuda-graph-backend-decode disabled)"
    return (f"Drop `{flag}` to benchmark the CUDA-graph decode path; keep it only if eager decode is what "
            f"you mean to measure (or sglang disabled graphs itself: its warning at start-up says why).")


# --- preflight: the compute path predicted from the release and the flags ---------------------
def _values_of(flags: list[str], name: str) -> Optional[list[str]]:
    """The values after `name` (nargs='+': until the next option), `--name=v` included; None if absent."""
    out: Optional[list[str]] = None
    for i, a in enumerate(flags):
        if a == name:
            out = []
            for b in flags[i + 1:]:
                if b.startswith("--"):
                    break
                out.append(b)
        elif a.startswith(name + "="):
            out = [a.split("=", 1)[1]]
    return out


def _ints(vals: Optional[list[str]]) -> Optional[list[int]]:
    try:
        got = [int(x) for v in vals or [] for x in v.replace(",", " ").split()]
    except ValueError:
        return None
    return got or None


def predict(k: Knowledge, version: str, flags: list[str], algorithm: Optional[str],
            max_running: Optional[int]) -> tuple[dict[str, Any], list]:
    """What the server will capture and where decode falls out of graphs, from the release's rules
    (configs/sglang/cuda_graph.toml) and the user's flags; (compute_path, findings)."""
    from dynspec_cli.knowledge.findings import Finding

    mask = k.mask_of(version)
    settings = k.graph_settings(mask)
    rule = k.batch_sizes(version)
    findings: list = []
    doc: dict[str, Any] = {"graphs": None, "captured_bs": None, "captured_max_bs": None, "eager_above": None,
                           "tokens_per_request_in_verify": None, "basis": None, "flags": []}
    if settings is None or rule is None:
        doc["basis"] = f"sglang {version} is not in configs/sglang/cuda_graph.toml"
        return doc, findings
    speculative = algorithm is not None
    # the user's spellings: this release's flags, and the old ones it renamed
    spell = {"max_bs": [settings.max_bs_flag], "bs": [settings.bs_flag]}
    for old, new in settings.renamed.items():
        if _values_of(flags, old) is None:
            continue
        if new:
            doc["flags"].append({"flag": old, "note": f"a deprecated alias of {new} on sglang {version}"})
            findings.append(Finding("DS319", f"{old} is a deprecated alias of {new} on sglang {version}; it still works.",
                                    fix=f"Write {new} (the alias is gone from 0.5.20)."))
            for key in ("max_bs", "bs"):
                if new == spell[key][-1]:
                    spell[key].insert(0, old)
        else:
            doc["flags"].append({"flag": old, "note": f"not a flag of sglang {version}"})
            findings.append(Finding("DS319", f"sglang {version} has no {old}: argparse reads it as an ambiguous prefix of "
                                             f"{old}-decode and {old}-prefill and exits before the server starts.",
                                    fix=f"Write {settings.max_bs_flag if 'max-bs' in old else settings.bs_flag} instead."))
    disable = [f for f in ("--disable-cuda-graph", "--disable-decode-cuda-graph") if f in flags]
    backend = _values_of(flags, "--cuda-graph-backend-decode")
    if backend and backend[0] == "disabled":
        disable.append("--cuda-graph-backend-decode disabled")
    if disable and (disable != ["--disable-decode-cuda-graph"] or "disable_decode_cuda_graph" in settings.disabled):
        doc.update(graphs="disabled", eager_above=0, basis=f"{disable[0]}: every decode step runs eager")
        findings.append(Finding("DS317", f"{disable[0]}: decode will run eager on every batch on sglang {version}.",
                                fix=_disable_fix(settings)))
        return doc, findings
    doc["graphs"] = "captured"
    listed = next((got for f in spell["bs"] if (got := _ints(_values_of(flags, f)))), None)
    top = next((got for f in spell["max_bs"] if (got := _ints(_values_of(flags, f)))), None)
    padding = "--disable-cuda-graph-padding" not in flags
    draft_tokens = _ints(_values_of(flags, "--speculative-num-draft-tokens"))
    if speculative:
        doc["tokens_per_request_in_verify"] = draft_tokens[0] if draft_tokens else None
    if listed:
        bs, basis = sorted(set(listed)), f"{spell['bs'][0]} as given"
    elif top:
        bs = rule.sizes(top[0], speculative=speculative, padding=padding)
        basis = (f"{spell['max_bs'][0]} {top[0]} and sglang {version}'s {'speculative' if speculative else 'plain'} "
                 f"batch-size list ({rule.source})")
    else:
        doc["basis"] = (f"the largest captured batch is sglang's default, chosen at start-up from the GPU's memory and "
                        f"TP ({rule.source.split(':')[0]}); pass {settings.max_bs_flag} to fix it")
        return doc, findings
    if max_running is not None and max(bs) > max_running:
        # the runner captures no batch larger than the request pool (max_running_requests), and the
        # pool's size instead (0.5.12.post1 cuda_graph_runner.py get_batch_sizes_to_capture)
        bs = sorted({b for b in bs if b < max_running} | {max_running})
    doc.update(captured_bs=bs, captured_max_bs=max(bs), eager_above=max(bs) if padding else None, basis=basis)
    if not padding:
        doc["basis"] += "; --disable-cuda-graph-padding: only these exact sizes replay a graph"
    if max_running is None or max_running > max(bs):
        per = doc["tokens_per_request_in_verify"]
        verify = (f" Each request's verify feeds {per} tokens, so the largest graph holds {max(bs) * per} tokens; the "
                  f"limit is still {max(bs)} running requests.") if per else (
            " With speculation the target's verify graph holds num_draft_tokens tokens per request; the limit is "
            "still counted in running requests." if speculative else "")
        findings.append(Finding(
            "DS318", f"decode runs in CUDA graphs up to {max(bs)} running requests (captured {_sizes(bs)}; {basis}); "
                     f"above {max(bs)} it runs eager, and max_running_requests "
                     f"{'is not capped' if max_running is None else f'= {max_running}'} lets the batch grow past it.{verify}",
            fix=f"Load the server at most {max(bs)} requests at a time, or raise `{settings.max_bs_flag}` to the "
                f"concurrency you benchmark (or pass `--max-running-requests {max(bs)}`)."))
    return doc, findings

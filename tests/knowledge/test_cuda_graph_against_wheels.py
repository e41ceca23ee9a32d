"""configs/sglang/cuda_graph.toml checked against the real published sglang wheels (every release
of releases.toml; the capture messages come from the rendered format strings of
tests/knowledge/test_tables_against_wheels.py's cached scan).

- each [[capture]] row's pattern matches a capture line written by one of its files in exactly the
  releases it names;
- every decode-path capture line of every release (target decode/verify, draft, draft extend) is
  read by exactly one row, whose role says whose graph it is;
- each [[settings]] row's server_args fields and flags exist in every release it covers, and a
  flag it calls gone is gone there.
"""
from __future__ import annotations

import functools
import re

import pytest

from tests.knowledge.test_tables_against_wheels import K, RELEASES, ids, releases_of, root, scan, span

pytestmark = pytest.mark.wheels

# Not decode-path captures: prefill / extend graphs, and other devices' graphs.
NOT_DECODE = re.compile(r"^Capture (?:piecewise CUDA graph|cuda graph num tokens|target prefill CUDA graph|(?:cpu|CPU|npu|NPU) graph)")


def decode_captures(version: str) -> list[tuple[str, str]]:
    return [(rel, m) for rel, m in scan(version)["captures"]
            if "/npu/" not in rel and not NOT_DECODE.match(m)]


@pytest.mark.parametrize("row", K.capture_rows, ids=lambda r: r.id)
def test_capture_row_written_in_its_releases_only(row):
    rx = re.compile(row.pattern)
    files = {"sglang/srt/" + f for f in row.files}
    written = [v for v in RELEASES if any(rel in files and row.literal in m and rx.search(m) for rel, m in decode_captures(v))]
    assert written == releases_of(row.versions), f"{row.id}: written by {span(written)}, the row says {row.versions}"


@pytest.mark.parametrize("version", RELEASES)
def test_every_decode_capture_line_has_one_row(version):
    """A capture line no row reads would leave its graph 'not captured'; two rows would disagree
    about whose graph it is."""
    rows = [r for r in K.capture_rows if K.mask(r.versions) & K.mask_of(version)]
    msgs = decode_captures(version)
    assert msgs
    for rel, msg in msgs:
        hits = [r for r in rows if r.literal in msg and re.search(r.pattern, msg)]
        assert len(hits) == 1, f"{rel}: {msg!r} is read by {[r.id for r in hits]}"
        head = re.split(r"\b(?:begin|end)\b", msg)[0]
        role = "draft-extend" if "extend" in head else "draft" if "draft" in head else "target"
        assert hits[0].role == role, f"{rel}: {msg!r} is a {role} capture, row {hits[0].id} says {hits[0].role}"


def test_target_capture_lists_its_batch_sizes():
    """The bs list the eager threshold is read from: `Capture cuda graph bs [...]` (<0.5.14), the
    target's begin line (0.5.14 - 0.5.21) or end line (0.5.22+), as sglang issue #33483 shows it."""
    row = next(r for r in K.capture_rows if r.id == "target-phase")
    line = "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 12, 16, 24, 32], avail mem=7.10 GB"
    assert re.search(row.pattern, line).group("bs") == "1, 2, 4, 8, 12, 16, 24, 32"
    for v in RELEASES:
        has_bs = [m for rel, m in decode_captures(v) if m.startswith("Capture target") and "bs=" in m]
        if K.mask_of(v) & K.mask(">=0.5.14"):
            assert has_bs, f"{v}: no target capture line lists bs="


# --- [[settings]] ------------------------------------------------------------------------------
FIELD_FILES = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/")


@functools.lru_cache(maxsize=None)
def field_source(version: str) -> str:
    r = root(version)
    paths = [r / FIELD_FILES[0], *sorted((r / FIELD_FILES[1]).glob("*.py"))]
    return "\n".join(p.read_text() for p in paths if p.is_file())


def has_field(version: str, name: str) -> bool:
    """A ServerArgs dataclass field (`name: type = default`, also `name: A[...]`)."""
    return re.search(rf"^\s+{re.escape(name)}\s*:", field_source(version), re.M) is not None


def flag_defined(version: str, flag: str) -> bool:
    """A literal `"--flag"` in server_args.py, or (0.5.20+, flags made from fields) a field of that name."""
    src = (root(version) / "sglang/srt/server_args.py").read_text()
    return f'"{flag}"' in src or has_field(version, flag[2:].replace("-", "_"))


SETTINGS_CASES = [(i, v) for i, r in enumerate(K.graph_settings_rows) for v in releases_of(r.versions)]


def test_settings_rows_cover_every_release_once():
    covered = [v for r in K.graph_settings_rows for v in releases_of(r.versions)]
    assert sorted(covered, key=RELEASES.index) == RELEASES


@pytest.mark.parametrize("i,version", SETTINGS_CASES, ids=ids(SETTINGS_CASES))
def test_settings_fields_and_flags_exist(i, version):
    row = K.graph_settings_rows[i]
    for name in (row.max_bs_field, row.bs_field, row.padding_off_field, *row.disabled):
        assert has_field(version, name), f"{version}: no server_args field {name}"
    for flag in (row.max_bs_flag, row.bs_flag, row.disable_flag.split()[0]):
        assert flag_defined(version, flag), f"{version}: no flag {flag}"
    for old, new in row.renamed.items():
        if new:  # a deprecated spelling that still parses
            src = (root(version) / "sglang/srt/server_args.py").read_text()
            at = src.find(f'"{old}"')
            assert at >= 0 and "Deprecated" in src[at:at + 300], f"{version}: {old} is not a deprecated alias"
        else:  # gone: argparse reads it as a prefix of the per-phase flags
            assert not flag_defined(version, old), f"{version}: {old} still defined"
            longer = [f for f in (f"{old}-decode", f"{old}-prefill") if flag_defined(version, f)]
            assert len(longer) == 2, f"{version}: {old} is not an ambiguous prefix ({longer})"


@pytest.mark.parametrize("version", RELEASES)
def test_decode_batch_line_reports_the_graph(version):
    """Every release's Decode batch line carries `cuda graph: True|False` (the label from a dict
    keyed by device from 0.5.9), read from can_run_cuda_graph."""
    r = root(version)
    writers = [p for p in (r / "sglang/srt").rglob("*.py")
               if b'"Decode batch' in p.read_bytes() or b"f\"Decode batch" in p.read_bytes()]
    assert writers, f"{version}: no Decode batch writer"
    assert any(b"cuda graph" in p.read_bytes() and b"can_run_cuda_graph" in p.read_bytes() for p in writers), \
        f"{version}: {[str(p.relative_to(r)) for p in writers]} do not write `cuda graph:`"


# --- [[batch_sizes]] ---------------------------------------------------------------------------
def sglang_generator(version: str, source: str):
    """sglang's own list builder of `version`, taken out of its file and compiled alone (it is
    plain list arithmetic on a few server_args fields), as a function (max_bs, speculative, padding)."""
    import ast
    import types

    rel, qual = source.split(":")
    path = root(version) / "sglang/srt" / rel
    text = path.read_text()
    tree = ast.parse(text)
    name = qual.split(".")[-1]
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert fn is not None, f"{version}: no {qual} in {rel}"
    ns: dict = {"resolving_view": lambda x: x, "Any": object}
    exec(compile(ast.Module([fn], []), str(path), "exec"), ns)
    f = ns[name]

    def call(max_bs: int, speculative: bool, padding: bool) -> list[int]:
        args = types.SimpleNamespace(cuda_graph_max_bs=max_bs, disable_cuda_graph_padding=not padding,
                                     speculative_algorithm="EAGLE3" if speculative else None)
        params = [a.arg for a in fn.args.args]
        return f(args) if params == ["self"] else f(args, max_bs)

    return call


MAX_BS = [1, 3, 4, 8, 9, 33, 48, 50, 63, 64, 80, 160, 256, 300, 512, 600]
BS_CASES = [(i, v) for i, r in enumerate(K.batch_sizes_rows) for v in releases_of(r.versions)]


def test_batch_sizes_rows_cover_every_release_once():
    covered = [v for r in K.batch_sizes_rows for v in releases_of(r.versions)]
    assert sorted(covered, key=RELEASES.index) == RELEASES


@pytest.mark.parametrize("i,version", BS_CASES, ids=ids(BS_CASES))
def test_batch_sizes_are_sglangs(i, version):
    row = K.batch_sizes_rows[i]
    gen = sglang_generator(version, row.source)
    for max_bs in MAX_BS:
        for spec in (True, False):
            for padding in (True, False):
                assert row.sizes(max_bs, speculative=spec, padding=padding) == gen(max_bs, spec, padding), \
                    (version, max_bs, spec, padding)

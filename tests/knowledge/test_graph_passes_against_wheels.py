"""configs/sglang/cuda_graph.toml [[passes]] checked against every real published sglang wheel: the
release's metrics collector declares the Counter `name="sglang:cuda_graph_passes_total"` with a
`mode` label in the row's file, and sets exactly the row's modes (`mode = "X" if value else "Y"`),
in exactly the releases the rows cover; a release no row covers has no such counter anywhere in
sglang/srt ("not reported")."""
from __future__ import annotations

import re

import pytest

from tests.knowledge.test_tables_against_wheels import K, RELEASES, releases_of, root, span

pytestmark = pytest.mark.wheels

MODE = re.compile(r'mode = "(\w+)" if value else "(\w+)"')


def _row(version):
    return next((r for r in K.graph_passes_rows if version in releases_of(r.versions)), None)


@pytest.mark.parametrize("version", RELEASES)
def test_counter_and_modes_per_release(version):
    row = _row(version)
    srt = root(version) / "sglang" / "srt"
    declared = sorted(str(p.relative_to(srt)) for p in srt.rglob("*.py")
                      if 'name="sglang:cuda_graph_passes_total"' in p.read_text(encoding="utf-8", errors="replace"))
    if row is None:
        assert declared == [], f"{version} declares the counter in {declared}; no [[passes]] row covers it"
        return
    assert declared == [row.file], (version, declared)
    text = (srt / row.file).read_text(encoding="utf-8")
    block = text[text.index('name="sglang:cuda_graph_passes_total"'):][:400]
    assert '+ ["mode"]' in block  # the scheduler's labels plus mode
    pairs = MODE.findall(text)
    assert tuple(row.decode) in pairs
    assert sorted(pairs) == sorted([tuple(row.decode)] + ([tuple(row.prefill)] if row.prefill else [])), (version, pairs)


def test_rows_cover_a_contiguous_span():
    covered = [v for v in RELEASES if _row(v) is not None]
    assert covered == RELEASES[RELEASES.index("0.5.7"):], span(covered)  # 0.5.7 onwards, no gap

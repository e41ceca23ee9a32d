"""configs/sglang/drafts.toml against the real wheels: each row's architecture names model classes
the release really registers (EntryClass in srt/models/), and both algorithms are members of its
SpeculativeAlgorithm; and the release has no pairing check of its own (else the row would be moot)."""
import re

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.support import wheels

pytestmark = pytest.mark.wheels
RELEASES = ["0.5.9", "0.5.23"]


@pytest.mark.parametrize("version", RELEASES)
def test_each_row_fits_the_release(version):
    root = wheels.unpacked(version) / "sglang" / "srt"
    entry = set()
    for f in (root / "models").glob("*.py"):
        m = re.search(r"^EntryClass\s*=\s*\[?([^\]\n]+)", f.read_text(errors="replace"), re.M)
        if m:
            entry |= {x.strip() for x in m.group(1).split(",") if x.strip()}
    algos = set(re.findall(r"^\s+([A-Z0-9_]+) = auto\(\)", (root / "speculative" / "spec_info.py").read_text(), re.M))
    k = knowledge()
    for row in k.draft_mismatches:
        assert k.mask(row.versions) & k.mask_of(version)
        hits = sorted(e for e in entry if re.search(row.architecture, e))
        assert hits, (row.architecture, version)
        assert {row.algorithm, row.expected} <= algos
        assert all(re.search(row.architecture, h) and not re.search(row.architecture, h.replace("3", "")) for h in hits)
    assert "LlamaForCausalLMEagle3" in entry and "LlamaForCausalLMEagle" in entry  # the pair PR #21272 is about

"""configs/acceptance.toml against the real wheels: each sglang flag exists with default 1.0 (so
below 1.0 is a relaxation) and each vLLM value is one of RejectionSampleMethod's, documented as the
rule says (synthetic: a configured rate; fly: lossy)."""
import re

import pytest

from dynspec_cli.verdict import acceptance
from tests.support import wheels
from tests.support import vllm_wheels

pytestmark = pytest.mark.wheels


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_sglang_flags_default_to_strict_acceptance(version):
    srt = wheels.unpacked(version) / "sglang" / "srt"
    # 0.5.9: server_args.py's dataclass and add_argument; 0.5.23: arg_groups/fields/spec.py, whose
    # annotated fields become the flags
    src = "\n".join(p.read_text() for p in (srt / "server_args.py", srt / "arg_groups" / "fields" / "spec.py") if p.exists())
    for r in (r for r in acceptance.rules() if r.engine == "sglang"):
        dest = r.flag[2:].replace("-", "_")
        assert re.search(rf"^\s+{dest}: (?:float|A\[\s*float,[^\]]*\]) = 1\.0$", src, re.M), (version, dest)
        assert r.below == 1.0


def test_vllm_values_are_rejection_sample_methods():
    src = vllm_wheels.read("0.33.0", "vllm/config/speculative.py")
    methods = re.search(r'RejectionSampleMethod = Literal\[(.*?)\]', src).group(1)
    doc = " ".join(src.split('rejection_sample_method: RejectionSampleMethod = "standard"')[1].split('"""')[1].split())
    for r in (r for r in acceptance.rules() if r.engine == "vllm"):
        assert f'"{r.equals}"' in methods
    assert "'synthetic' accepts draft tokens with a decaying probability calibrated to synthetic_acceptance_rate" in doc
    assert "'fly' applies FLy's lossy" in doc
    assert acceptance.of("vllm", ["--speculative-config", '{"rejection_sample_method": "fly"}'])["provenance"] == "lossy"
    assert acceptance.of("vllm", ["--speculative-config", '{"rejection_sample_method": "block"}'])["provenance"] == "real"

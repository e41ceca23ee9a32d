"""The [plugin] section of a feature file: what a plugin-delivered patch says about itself, and
one clear line (exit 2) for each way of getting it wrong."""
import subprocess
import sys

import pytest

from dynspec_cli import engines
from dynspec_cli.knowledge.features import load_feature

GOOD = '''name = "dsd-plugin"
title = "Dynamic speculation disable, as a plugin"
[marker]
pattern = 'Dynamic speculation disable enabled: threshold=(?P<threshold>-?\\d+)'
literal = "Dynamic speculation disable enabled"
[plugin]
entry_point = "dsd"
target = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"
hook = "AFTER"
'''

LOG = "[2026-01-01 00:00:00] Dynamic speculation disable enabled: threshold=5\n"


def test_the_section_loads_with_its_defaults(tmp_path):
    (tmp_path / "f.toml").write_text(GOOD)
    f = load_feature(str(tmp_path / "f.toml"))
    engines.of(f)  # the [plugin] section is checked (and its hook type lowered) by the feature's engine
    assert f.plugin.entry_point == "dsd" and f.plugin.hook == "after"  # HookType values are lower case
    assert f.plugin.processes == ["scheduler"] and f.plugin.distribution == ""


BAD = [
    ('hook = "AFTER"', 'hook = "sideways"', "plugin.hook 'sideways': must be one of before, after, around, replace"),
    ('entry_point = "dsd"', 'entry_point = "dsd,other"', "plugin.entry_point 'dsd,other': must be one name, without blanks or commas"),
    ('entry_point = "dsd"', 'entry_point = "my dsd"', "plugin.entry_point 'my dsd': must be one name"),
    ('target = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"', 'target = "torch.nn.Linear.forward"',
     "plugin.target 'torch.nn.Linear.forward': must be inside the sglang package"),
    ('target = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"', 'target = "sglang"',
     "plugin.target 'sglang': must be a dotted path module.attribute"),
    ('target = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"', 'target = "sglang.srt..x"',
     "plugin.target 'sglang.srt..x': must be a dotted path"),
    ('hook = "AFTER"', 'hook = "after"\nprocesses = ["tokenizer"]',
     "plugin.processes: unknown process 'tokenizer': choose from main, scheduler, detokenizer, data_parallel_controller"),
    ('hook = "AFTER"', 'hook = "after"\nprocesses = []', "plugin.processes is empty"),
    ('hook = "AFTER"', 'hook = "after"\nprocesses = "scheduler"', "Expected `array`, got `str` - at `$.plugin.processes`"),
    ('hook = "AFTER"', 'hook = "after"\ncolour = "red"', "Object contains unknown field `colour` - at `$.plugin`"),
    ('hook = "AFTER"', '', "Object missing required field `hook` - at `$.plugin`"),
    ('name = "dsd-plugin"', 'name = "dsd-plugin"\nengine = "vllm"',
     "plugin.target 'sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__': must be a dotted path inside the vllm package"),
    (GOOD, GOOD.replace('[marker]', 'engine = "vllm"\n[marker]').replace(
        "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__", "vllm.v1.spec_decode.eagle.EagleProposer.propose"),
     "plugin.hook 'AFTER': vLLM has no hook registry; say 'patch'"),
]


@pytest.mark.parametrize("old,new,message", BAD, ids=[b[2][:40] for b in BAD])
@pytest.mark.parametrize("command", ["verify", "preflight"])
def test_a_bad_section_is_one_line_exit_2(tmp_path, old, new, message, command):
    assert old in GOOD
    (tmp_path / "f.toml").write_text(GOOD.replace(old, new, 1))
    (tmp_path / "s.log").write_text(LOG)
    args = ["verify", "--feature", "f.toml", "s.log"] if command == "verify" else \
        ["preflight", "--feature", "f.toml", "--python", sys.executable, "--", "--model-path", "/m"]
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert message in r.stderr and "f.toml" in r.stderr

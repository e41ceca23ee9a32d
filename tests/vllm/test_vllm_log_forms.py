"""vLLM logs in the forms people paste them (issue 19): colour codes in caret notation and `^M`,
launch commands (`--speculative_config`, one flag per line, a k8s `args:` list) read for the method,
a command pasted after the crash, and the crash forms of configs/vllm/log_lines.toml. Built from the
real excerpts in tests/fixtures/logs/vllm/ (numbers below); the expected values are the labels a
person wrote for those excerpts."""
import json
from pathlib import Path

import pytest

from dynspec_cli import engines
from dynspec_cli.evidence.commands import CommandReader, parse_flags
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.verdict.pipeline import judge_file

VLLM = engines.get("vllm").tables  # (whose launch_flags.toml reads the commands)

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm"


def _fixture(prefix: str) -> tuple[str, dict]:
    log = next(HERE.glob(f"{prefix}-*.log"))
    return log.read_text(), json.loads(log.with_suffix(".json").read_text())["expected"]


def _verify(tmp_path, text: str) -> dict:
    """`dynspec verify --json LOG`: engine `auto`, the default feature."""
    p = tmp_path / "server.log"
    p.write_text(text)
    feature = load_feature(None)
    engine = engines.resolve("auto", str(p), feature)
    assert engine == "vllm"
    return judge_file(str(p), feature, engine=engines.get(engine)).to_json()


def _claims(doc: dict) -> dict:
    return {k: c["value"] for k, c in doc["claims"].items()}


def _labels(exp: dict) -> dict:
    return {k: exp[k] for k in ("crashed", "server_ready", "speculative_algorithm", "worker", "speculative")}


@pytest.mark.parametrize("prefix", ["10", "14", "24", "30"])
def test_caret_notation_colours_and_carriage_returns(tmp_path, prefix):
    """`less`/`cat -v` show vLLM's coloured process tag as `^[[1;36m(EngineCore_DP0 pid=395)^[[0;0m`
    and CRLF line ends as `^M`; the verdict is the clean excerpt's."""
    text, exp = _fixture(prefix)
    pasted = "".join((f"^[[1;36m{line[:line.index(')') + 1]}^[[0;0m{line[line.index(')') + 1:]}" if line.startswith("(")
                      else line) + "^M\n" for line in text.splitlines())
    assert "^[[" in pasted or prefix == "24"
    assert _claims(_verify(tmp_path, pasted)) == _labels(exp)


def test_json_escaped_colour_codes(tmp_path):
    text, exp = _fixture("22")
    pasted = "".join(f"\\u001b[36m{line}\\u001b[0m\n" for line in text.splitlines())
    assert _claims(_verify(tmp_path, pasted)) == _labels(exp)


def test_speculative_config_read_from_the_command():
    # fixture 16's thread (vllm#19775): the V0-era api_server command, --speculative_config with an underscore
    flags = parse_flags(" --host 0.0.0.0 --port 8000 --model meta-llama/Llama-3.3-70B-Instruct --seed 42 -tp 4 "
                        "--max-model-len 4096 --speculative_config '{\"model\": \"meta-llama/Llama-3.2-1B\", "
                        "\"num_speculative_tokens\": 5}'", VLLM)
    assert flags == {"tensor_parallel_size": 4,
                     "speculative_config": {"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5}}
    assert parse_flags(" m --speculative-config '{\"method\": ' --tp 2", VLLM) == {}  # cut JSON: no value


def test_kubernetes_args_list_one_item_per_flag(tmp_path):
    """A Deployment's `args:` list (flags and values as separate items), with fixture 24's values,
    then fixture 24's log: the method is the command's."""
    text, exp = _fixture("24")
    manifest = ("        command: [\"vllm\"]\n        args:\n        - serve\n        - /models/gpt-oss-120b\n"
                "        - --tensor-parallel-size\n        - \"2\"\n        - --speculative-config\n"
                "        - '{\"model\": \"nvidia/gpt-oss-120b-Eagle3\", \"num_speculative_tokens\": 3, \"method\":\"eagle3\"}'\n")
    log = "".join(line + "\n" for line in text.splitlines() if line.startswith("("))
    doc = _verify(tmp_path, "        - vllm serve\n" + manifest + log)
    assert doc["claims"]["speculative_algorithm"]["value"] == "eagle3"
    assert doc["claims"]["speculative_algorithm"]["basis"] == "requested by the launch command in the log"
    r = CommandReader(VLLM)
    assert r.feed("        - --speculative-config") == ("command-cont", {})
    assert r.feed("        - '{\"method\": \"mtp\"}'") == ("command-cont", {"speculative_config": {"method": "mtp"}})


def test_command_pasted_after_the_crash_is_the_same_launch(tmp_path):
    """People paste the crash, then "my command was": the command does not start a launch."""
    text, exp = _fixture("24")
    lines = text.splitlines()
    command = [line for line in lines if not line.startswith("(")]
    log = [line for line in lines if line.startswith("(")]
    doc = _verify(tmp_path, "\n".join(log + ["", "my command was:"] + command) + "\n")
    assert _claims(doc) == _labels(exp)
    assert doc["launch"]["of"] == 1 and doc["verdict"] == "crashed"


def test_a_command_before_a_new_launch_belongs_to_it(tmp_path):
    """A crashed launch, then a command and the next launch's start-up lines: the method is the
    second launch's (fixtures 20 and 16's command/log; the second launch asks for no method)."""
    crash, _ = _fixture("20")
    second, _ = _fixture("16")
    cmd = "vllm serve m --speculative-config '{\"method\": \"eagle3\", \"model\": \"d\", \"num_speculative_tokens\": 3}'"
    doc = _verify(tmp_path, crash + cmd + "\n" + second)
    assert doc["launch"]["index"] == 2
    assert doc["speculative_algorithm"] == "eagle3" and doc["claims"]["speculative_algorithm"]["line"] == len(crash.splitlines()) + 1


def test_no_vllm_line_is_not_called_empty(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("vllm serve m --speculative-config '{\"method\": \"ngram\"}'\nall good\n")
    doc = judge_file(str(p), load_feature(None), engine=engines.get("vllm")).to_json()
    assert doc["speculative_algorithm"] == "ngram" and "empty" not in json.dumps(doc["findings"])


def test_dynamic_speculation_switched_off_on_the_v1_runner(tmp_path):
    """The 0.33 warning the miner found (tests/tools/mine_vllm_warnings.py), in vLLM's format: the
    feature's knob is off, as with DP > 1 (DS604)."""
    from dynspec_cli.engines.vllm.knowledge import knowledge

    text = knowledge().line_by_id["dynamic-sd-off-v1"].text.replace("%s", "ngram").replace("%d", "3")
    p = tmp_path / "server.log"
    p.write_text(f"(APIServer pid=1) WARNING 05-06 06:05:38 [vllm.py:1100] {text}\n")
    doc = judge_file(str(p), load_feature("vllm-eagle-speculator-example"), engine=engines.get("vllm")).to_json()
    ds604 = [f for f in doc["findings"] if f["code"] == "DS604"]
    assert ds604 and "Model Runner V1" in ds604[0]["message"] and ds604[0]["line"] == 1

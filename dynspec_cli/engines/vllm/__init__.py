"""vLLM (engines/protocol.py is the contract this folder keeps).

Its knowledge is configs/vllm/ (knowledge.py); its log lines become observations in rules.py and a
verdict in judge.py; preflight.py reads the installed vllm through inspector/ (run by the server's
python, never importing vllm); serving.py is `vllm serve` and its stats lines. No in-server probe
and no adaptive controller yet: `supports()` says so. This face imports none of them but the
shape of its log lines (detect.py), which `--engine auto` asks for.
"""
from __future__ import annotations

from typing import Optional

from dynspec_cli.engines import protocol
from dynspec_cli.engines.protocol import Base, Fact, Serving

# `vllm serve MODEL`, its readiness and its /metrics counters (vllm/v1/metrics/loggers.py and
# vllm/v1/spec_decode/metrics.py); its readers of its serving lines and counters: serving.py.
# vLLM has no /health_generate; its /health is 200 once the engine core is up.
SERVING = Serving(
    "vllm.entrypoints.cli.main", command=("serve",), readiness=("/health",), api="openai", metrics_prefix="vllm:",
    counters=("vllm:generation_tokens_total", "vllm:request_success_total", "vllm:prompt_tokens_total",
              "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
              "vllm:spec_decode_num_accepted_tokens_total"),
    rank_label=("engine", "engine "), dp_flags=("--data-parallel-size", "-dp"),
    startup=("non-default-args", "engine-config"))


class Vllm(Base):
    name = "vllm"
    title = "vLLM"
    package = "vllm"
    version_key = None  # its verdicts carry engine_version only
    serving = SERVING
    capabilities = frozenset({protocol.PROVE})

    def detect_shape(self) -> tuple[Optional[str], Optional[str]]:
        from dynspec_cli.engines.vllm import detect

        return detect.PROC, detect.PREFIX

    def knowledge(self):
        from dynspec_cli.engines.vllm.knowledge import knowledge

        return knowledge()

    def check_feature(self, feature) -> None:
        if feature.plugin is not None:
            from dynspec_cli.engines.vllm.plugins import check_plugin

            check_plugin(feature)

    def classifier(self, feature):
        from dynspec_cli.engines.vllm.rules import VllmClassifier

        return VllmClassifier(self.knowledge(), feature)

    def judge(self, feature, patched=None, version=None, diff=None):  # (the log's judge does not place hunks for vLLM yet)
        from dynspec_cli.engines.vllm.judge import VllmJudge

        return VllmJudge(self.knowledge(), feature, patched_classes=patched, engine_version=version)

    def report_facts(self, doc: dict) -> list[Fact]:
        """vLLM has a model runner where sglang has an overlap scheduler."""
        return [(self.name, doc.get("engine_version") or "unknown", None),
                ("speculative method", doc["speculative_algorithm"] or "unknown", None),
                ("model runner", (doc.get("model_runner") or "unknown").upper(), None)]

    def preflight(self, host, python, feature, flags, env, patched=None, *, patch_diff=None, dynamic=False) -> dict:
        from dynspec_cli.engines.vllm import preflight

        return preflight.run(host, python, feature, flags, env, dynamic=dynamic, patch_diff=patch_diff)

    def preflight_text(self, result: dict) -> Optional[str]:
        from dynspec_cli.engines.vllm import preflight

        return preflight.render(result)

    def decode_lines(self):
        from dynspec_cli.engines.vllm.serving import EngineStatsLines

        return EngineStatsLines()

    def metric_accept(self, samples: list[dict]) -> dict[str, float]:
        from dynspec_cli.engines.vllm.serving import metric_accept

        return metric_accept(samples)

    def tokens_per_verify(self, counters: dict[str, float]) -> Optional[float]:
        from dynspec_cli.engines.vllm.serving import tokens_per_verify

        return tokens_per_verify(counters)


ENGINE = Vllm()

"""sglang, the engine dynspec began with (engines/protocol.py is the contract this folder keeps).

Its knowledge is configs/sglang/ (knowledge.py); its log lines become observations in rules.py,
a launch's state in launch.py and parts.py, a verdict in judge.py (with claims.py, workers.py,
compute_path.py); preflight.py reads the installed sglang through inspector/ (run by the server's
python); probe/ and probe_setup.py are its in-server probe; adaptive.py holds its adaptive
controller to its rule under guard. This face imports none of them: each is loaded when asked.
"""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.engines import protocol
from dynspec_cli.engines.protocol import Base, Fact, Serving

# How a profile starts it and asks whether it is ready; what prove and guard read while it serves
# (the names: sglang/srt/metrics/collector.py). Its readers of those lines: serving.py.
SERVING = Serving(
    "sglang.launch_server", model_flag="--model-path",
    # /health_generate runs a real generation; /health answers before the scheduler can serve
    readiness=("/health_generate", "/health"), api="generate", metrics_prefix="sglang:",
    counters=("sglang:generation_tokens_total", "sglang:num_requests_total", "sglang:spec_verify_calls_total",
              "sglang:prompt_tokens_total"),
    startup=("server-args-dump",), multi_node=True,
    accept_gauge="sglang:spec_accept_length", steps_gauge="sglang:spec_num_steps",
    graph_passes="sglang:cuda_graph_passes_total",
    backend_fields=("attention_backend", "speculative_draft_attention_backend"))


class Sglang(Base):
    name = "sglang"
    title = "sglang"
    package = "sglang"
    version_key = "sglang_version"
    launch_boundary = b"server_args="  # the dump every launch writes once (evidence/bigfile.py jumps to the last)
    serving = SERVING
    capabilities = frozenset({protocol.PROVE, protocol.PROBE, protocol.ADAPTIVE, protocol.GRAPH_PASSES,
                              protocol.PATCHED_FILES})

    @property
    def probe(self):
        from dynspec_cli.engines.sglang import probe_setup

        return probe_setup

    @property
    def adaptive(self):
        from dynspec_cli.engines.sglang import adaptive

        return adaptive

    def knowledge(self):
        from dynspec_cli.engines.sglang.knowledge import knowledge

        return knowledge()

    # --- a feature -------------------------------------------------------------------------------
    def check_feature(self, feature) -> None:
        if feature.plugin is not None:
            from dynspec_cli.engines.sglang.plugins import check_plugin

            check_plugin(feature)

    def check_version(self, version: Optional[str], what: str) -> Optional[str]:
        """A release the tables know, as given. An unparseable or unknown version would silently turn
        every version-keyed rule off (a dead log read as inconclusive), so it is refused."""
        if version is None:
            return None
        from packaging.version import InvalidVersion, Version

        try:
            Version(version)
        except InvalidVersion:
            raise ValueError(f"{what} {version!r}: not a version (like 0.5.9)") from None
        k = self.knowledge()
        if not k.known(version):
            raise ValueError(f"{what} {version}: not an sglang release dynspec knows ({k.releases[0]} – {k.releases[-1]})")
        return version

    def patched_classes(self, diff: str, marker_literal: str) -> list[str]:
        from dynspec_cli.engines.sglang.diffclasses import patched_classes

        return patched_classes(diff, marker_literal)

    # --- a log ---------------------------------------------------------------------------------
    def classifier(self, feature):
        from dynspec_cli.engines.sglang.rules import Classifier

        return Classifier(self.knowledge(), feature)

    def judge(self, feature, patched=None, version=None, diff=None):
        from dynspec_cli.engines.sglang.judge import Judge

        return Judge(self.knowledge(), feature, patched_classes=patched, sglang_version=version, diff=diff)

    def report_facts(self, doc: dict) -> list[Fact]:
        """The release, the algorithm (as the command or the worker says it when sglang did not
        resolve it in this log), what the command asked and sglang resolved otherwise, the overlap
        scheduler."""
        out: list[Fact] = [(self.title, doc[self.version_key] or "unknown", None)]
        claims = doc.get("claims") or {}
        algo = claims.get("speculative_algorithm") or {}
        if doc["speculative_algorithm"] or not algo.get("value"):
            out.append(("speculative algorithm", doc["speculative_algorithm"] or "unknown", None))
        else:
            out.append(("speculative algorithm", f"{algo['value']}  ", f"({algo['basis']}, line {algo['line']})"))
        for dest, r in ((doc.get("requested") or {}).get("flags") or {}).items():
            if "effective" in r and r["effective"] != r["requested"]:
                out.append(("requested", f"{dest}={r['requested']} (line {r['requested_line']}), "
                                         f"sglang resolved {r['effective']} (line {r['effective_line']})", None))
        ov = doc["overlap_schedule"]
        out.append(("overlap scheduler", "unknown" if ov is None else ("on" if ov else "off"), None))
        return out

    # --- before launch ---------------------------------------------------------------------------
    def preflight(self, host, python, feature, flags, env, patched=None, *, patch_diff=None, dynamic=False) -> dict:
        from dynspec_cli.engines.sglang import preflight

        return preflight.run(host, python, feature, flags, env, patched=patched, patch_diff=patch_diff, dynamic=dynamic)

    def preflight_facts(self, result: dict) -> list[Fact]:
        return [(self.title, f"{result[self.version_key] or 'unknown'}  ({result['sglang_path'] or 'not importable'})"
                 + ("  editable" if result.get("editable") else ""), None)]

    def install_of(self, preflight: dict) -> Optional[str]:
        return preflight.get("sglang_path")

    # --- while it serves --------------------------------------------------------------------------
    def decode_lines(self):
        from dynspec_cli.engines.sglang.serving import DecodeBatchLines

        return DecodeBatchLines()

    def patched_files(self, host, python, feature, flags, *, given=(), diff_path=None) -> tuple[list[tuple[str, str]], str]:
        from dynspec_cli.engines.sglang.preflight import patched_files

        return patched_files(host, python, feature, flags, given=given, diff_path=diff_path)

    def tokens_per_verify(self, counters: dict[str, float]) -> Optional[float]:
        from dynspec_cli.engines.sglang.serving import tokens_per_verify

        return tokens_per_verify(counters)

    def graphs_off(self, args: dict[str, Any]) -> Optional[bool]:
        """/server_info's server args switch decode graphs off (compute_path.py's rule, any release)."""
        from dynspec_cli.engines.sglang.compute_path import disabled_by

        return disabled_by(self.knowledge(), None, args) is not None


ENGINE = Sglang()

"""A vLLM feature's [plugin] section, checked against vLLM's plugin framework (configs/vllm/plugins.toml)."""
from __future__ import annotations

from dynspec_cli.knowledge.features import Feature


def check_plugin(feature: Feature) -> None:
    """vLLM's general plugins have no hook registry: the plugin's function patches `target` itself,
    in every process. ConfigError naming the feature file; the processes default to all of them."""
    from dynspec_cli.engines.vllm.knowledge import knowledge
    from dynspec_cli.knowledge.tables import ConfigError

    p = feature.plugin
    fw = knowledge().plugins

    def bad(message: str) -> ConfigError:
        return ConfigError(f"{feature.source or feature.name}: {message}")

    if not p.entry_point or (not fw.allow_strips and p.entry_point != p.entry_point.strip()) or "," in p.entry_point:
        raise bad(f"plugin.entry_point {p.entry_point!r}: must be one name, without commas or outer blanks "
                  f"({fw.allow_env} is split on commas)")
    parts = p.target.split(".")
    if len(parts) < 2 or not all(x.isidentifier() for x in parts) or parts[0] != "vllm":
        raise bad(f"plugin.target {p.target!r}: must be a dotted path inside the vllm package "
                  "(e.g. vllm.v1.spec_decode.eagle.EagleProposer.propose)")
    if p.hook.lower() not in fw.hook_types:
        raise bad(f"plugin.hook {p.hook!r}: vLLM has no hook registry; say {' or '.join(map(repr, fw.hook_types))} "
                  "(the plugin's function patches the target itself)")
    p.hook = p.hook.lower()
    if p.processes == ["scheduler"]:  # the default is sglang's: vLLM loads general plugins in every process
        p.processes = list(fw.processes)
    for name in p.processes:
        if name not in fw.processes:
            raise bad(f"plugin.processes: unknown process {name!r}: choose from {', '.join(fw.processes)}")

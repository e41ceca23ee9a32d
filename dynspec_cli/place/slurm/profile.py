"""A Slurm profile: an ordinary profile (what every node's server runs: python, env, flags, port,
log) with `scheduler = "slurm"` and a `[slurm]` table (what is asked of the scheduler: nodes,
partition, time, ...). `host` is the cluster's login host, where sbatch runs."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import msgspec

from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.place.multinode import refuse_group_flags
from dynspec_cli.run.profiles import Profile, as_profile, read_profile, with_overrides

SCHEDULER = "slurm"  # a profile's `scheduler = "slurm"` (or a [slurm] table) selects this placement
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")
_WORD = re.compile(r"^[A-Za-z0-9_.,:+-][A-Za-z0-9_.,:+()&|\[\]-]*$")


class SlurmSpec(msgspec.Struct, forbid_unknown_fields=True, rename="kebab"):
    """The profile's `[slurm]` table."""

    nodes: int = 1
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    time: Optional[str] = None  # sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
    gpus_per_node: Optional[int] = None
    constraint: Optional[str] = None
    extra: list[str] = []  # further sbatch options, each one "--opt=value"
    dist_init_port: int = 0  # 0: a free port on the head node, chosen inside the job
    dynspec: Optional[str] = None  # how the nodes run dynspec (preflight); default: as on the login host
    pending_timeout: Optional[float] = None  # give up (scancel) on a job still PENDING this long
    conf: Optional[str] = None  # SLURM_CONF for the Slurm commands on the login host (default: the host's own)

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 4096:
            raise ValueError(f"nodes = {self.nodes}: must be between 1 and 4096")
        for key in ("partition", "account", "qos", "constraint"):
            v = getattr(self, key)
            if v is not None and not _WORD.match(v):
                raise ValueError(f"{key} = {v!r}: not a Slurm name")
        if self.time is not None and not _TIME.match(self.time):
            raise ValueError(f"time = {self.time!r}: use minutes, MM:SS, HH:MM:SS or D-HH:MM:SS")
        if self.gpus_per_node is not None and not 0 <= self.gpus_per_node <= 64:
            raise ValueError(f"gpus-per-node = {self.gpus_per_node}: must be between 0 and 64")
        for opt in self.extra:
            if not opt.startswith("--") or "\n" in opt:
                raise ValueError(f"extra: {opt!r}: give each sbatch option as one '--name=value' string")
            if opt.split("=", 1)[0] in ("--nodes", "-N", "--ntasks-per-node", "--output", "--job-name", "--parsable",
                                        "--open-mode", "--export"):
                raise ValueError(f"extra: {opt!r} is set by dynspec (use the [slurm] keys)")
        if not 0 <= self.dist_init_port <= 65535:
            raise ValueError(f"dist-init-port = {self.dist_init_port}: not a TCP port")
        if self.pending_timeout is not None and self.pending_timeout <= 0:
            raise ValueError("pending-timeout must be positive")


@dataclass

@dataclass
class SlurmProfile:
    prof: Profile
    slurm: SlurmSpec
    source: str


def load(ref: str, *, env: list[str] | None = None, sets: list[str] | None = None, name: str | None = None,
         host: str | None = None) -> SlurmProfile:
    from dynspec_cli import place

    p, raw = read_profile(ref)
    sched = raw.pop("scheduler", None)
    table = raw.pop("slurm", None)
    if sched != SCHEDULER:
        raise place.unknown_scheduler(p, sched)
    if not isinstance(table, dict):
        raise ConfigError(f"{p}: scheduler = \"slurm\" needs a [slurm] table (nodes, partition, time, ...)")
    try:
        spec = msgspec.convert(table, SlurmSpec, strict=True)
    except (msgspec.ValidationError, ValueError) as e:
        raise ConfigError(f"{p}: [slurm]: {e}") from None
    refuse_group_flags(raw.get("flags"), str(p), "dynspec inside the Slurm job")
    prof = with_overrides(as_profile(raw, p), host=host, env=env, sets=sets, name=name)
    return SlurmProfile(prof, spec, str(p))

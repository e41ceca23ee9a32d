"""Profiles: TOML files saying what to start where (host, python, env, server flags, port,
log, feature, engine). Users keep their own; `configs/profiles/` has examples. The engine
(its `engine =`, or the feature's) decides the command line (the engine's `serving`, engines/protocol.py)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Optional, Union

import msgspec

from dynspec_cli.knowledge.tables import ConfigError, configs_dir
from dynspec_cli.resources import tomllib
from dynspec_cli import engines

FlagValue = Union[str, int, float, bool, list[Union[str, int, float]]]
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAG_NAME = re.compile(r"^(--)?[a-z0-9][a-z0-9-]*$")


class Profile(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    host: str = "local"  # "local", an ssh_config alias, or user@host[:port]
    python: str = "python3"  # the interpreter that runs the server (and imports the patched sglang)
    workdir: Optional[str] = None
    engine: Optional[str] = None  # a name in the engine registry; default: the feature's engine (see for_feature)
    module: Optional[str] = None  # default: the engine's server module (Serving.module)
    model: Optional[str] = None  # vllm: `vllm serve MODEL`; sglang: --model-path MODEL (or flags.model-path)
    port: int = 30000
    log: str = "~/.dynspec/logs/{name}.log"
    feature: str = "dynamic-spec-disable"
    patched_class: list[str] = []
    patch: Optional[str] = None  # the unified diff applied (relative: to the profile file's folder)
    sglang_version: Optional[str] = None
    ready_timeout: float = 3600.0
    ssh_config: Optional[str] = None  # ssh_config for reaching `host` (see cli/sshsettings.py)
    known_hosts: Optional[str] = None  # known_hosts for reaching `host`
    env: dict[str, str] = {}
    flags: dict[str, FlagValue] = {}
    source: str = ""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", self.name):
            raise ValueError(f"name {self.name!r}: use letters, digits, '.', '_', '-' (max 64)")
        if not self.python or self.python.startswith("-") or "\n" in self.python or "\x00" in self.python:
            raise ValueError(f"python {self.python!r}: not an interpreter path (it is empty, starts with '-' or "
                             f"holds a newline)")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port}: not a TCP port")
        for k in self.env:
            if not _ENV_NAME.match(k):
                raise ValueError(f"env: {k!r} is not a valid environment variable name")
        for k in self.flags:
            if not _FLAG_NAME.match(k):
                raise ValueError(f"flags: {k!r} is not a server flag name (like 'model-path')")
        if self.engine is not None and self.engine not in engines.names():
            raise ValueError(f"engine {self.engine!r}: choose one of {', '.join(engines.names())}")
        if self.ready_timeout <= 0:
            raise ValueError("ready_timeout must be positive")

    def argv(self) -> list[str]:
        serving = engines.get(self.engine or engines.DEFAULT).serving
        out = [self.python, "-m", self.module or serving.module, *serving.command]
        if self.model:
            out += [serving.model_flag, self.model] if serving.model_flag else [self.model]
        flags = dict(self.flags)
        if "port" not in flags and "--port" not in flags:
            flags["port"] = self.port
        for k, v in flags.items():
            name = k if k.startswith("--") else f"--{k}"
            if v is True:
                out.append(name)
            elif v is False:
                continue
            elif isinstance(v, list):
                out.append(name)
                out.extend(str(x) for x in v)
            else:
                out += [name, str(v)]
        return out

    def log_path(self) -> str:
        return self.log.replace("{name}", self.name)


def profile_file(ref: str) -> Path:
    """The file a profile reference names: a path (a name ending in .toml, or any file that
    exists), else a bundled profile's name (configs/profiles/NAME.toml). The one place a
    reference becomes a file, for every placement's loader. ConfigError if it names neither."""
    p = Path(ref)
    if p.suffix == ".toml" or p.exists():
        return p
    bundled = configs_dir() / "profiles" / f"{ref}.toml"
    if not bundled.exists():
        raise ConfigError(f"profile {ref!r} not found (give a path to a .toml file)")
    return bundled


def read_profile(ref: str) -> tuple[Path, dict]:
    """(file, its TOML as read) of a profile reference, before any placement takes its keys
    out; a file that cannot be read is one ConfigError line naming it (as knowledge's load_toml)."""
    p = profile_file(ref)
    try:
        return p, tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory, not a TOML file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from None


def as_profile(raw: dict, p: Path) -> Profile:
    """The profile of what `raw` holds once a placement has taken its own keys out of it (one
    ConfigError line naming the file and the key); `source` is the file."""
    try:
        prof = msgspec.convert(raw, Profile, strict=True)
    except (msgspec.ValidationError, ValueError) as e:
        raise ConfigError(f"{p}: {e}") from None
    prof.source = str(p)
    return prof


def load_profile(ref: str) -> Profile:
    """A one-server profile (what `dynspec launch` starts on a host, `dynspec preflight` judges)."""
    p, raw = read_profile(ref)
    prof = as_profile(raw, p)
    if prof.patch is not None:  # relative to the profile, wherever dynspec runs from
        where = (p.parent / prof.patch).resolve()
        if not where.is_file():
            raise ConfigError(f"{p}: patch = {prof.patch!r}: no such file ({where})")
        prof.patch = str(where)
    return prof


def for_feature(prof: Profile, feature) -> Profile:
    """The profile with its engine settled: its own `engine`, else its feature's. A profile whose
    engine is not the one its feature's patch is for is refused (ConfigError: one line, exit 2)."""
    engine = engines.name_of(feature)
    if prof.engine is not None and prof.engine != engine:
        raise ConfigError(f"{prof.source or prof.name}: engine {prof.engine!r}, but feature {feature.name!r} is a "
                          f"{engine} patch; set feature to a {prof.engine} feature")
    return msgspec.structs.replace(prof, engine=engine)


def single_engine(prof: Profile, feature, what: str) -> None:
    """Group and Slurm launches compute the engine's multi-node flags: a profile of an engine without
    them is refused there (one line, exit 2) until they are built for it."""
    engine = for_feature(prof, feature).engine
    if not engines.get(engine).serving.multi_node:
        able = ", ".join(n for n, s in engines.all_serving().items() if s.multi_node)
        raise ConfigError(f"{prof.source or prof.name}: {what} is built for {able} only, not {engine}; "
                          f"start one {engine} server with dynspec launch")


def with_overrides(prof: Profile, *, host: str | None = None, env: list[str] | None = None,
                   sets: list[str] | None = None, name: str | None = None, patch: str | None = None) -> Profile:
    """Apply CLI overrides: --host H, --env K=V, --set flag=value (value 'true' = bare flag,
    'false' = drop it), --name N."""
    new_env = dict(prof.env)
    for item in env or []:
        k, eq, v = item.partition("=")
        if not eq or not _ENV_NAME.match(k):
            raise ConfigError(f"--env {item!r}: expected NAME=VALUE")
        new_env[k] = v
    new_flags = dict(prof.flags)
    for item in sets or []:
        k, eq, v = item.partition("=")
        k = k[2:] if k.startswith("--") else k
        if not eq or not _FLAG_NAME.match(k):
            raise ConfigError(f"--set {item!r}: expected flag=value (e.g. speculative-eagle-topk=1)")
        low = v.lower()
        new_flags[k] = True if low == "true" else False if low == "false" else v
    try:
        return msgspec.structs.replace(prof, host=host or prof.host, env=new_env, flags=new_flags, name=name or prof.name,
                                     patch=patch or prof.patch)
    except ValueError as e:
        raise ConfigError(f"{prof.source}: {e}") from None


def shown_command(argv: list[str], env: dict[str, str]) -> str:
    from dynspec_cli.run.secrets import redact_argv, redact_env

    e = " ".join(f"{k}={shlex.quote(v)}" for k, v in redact_env(env).items())
    return (e + " " if e else "") + shlex.join(redact_argv(argv))

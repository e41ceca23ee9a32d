"""The command a person pastes to start, by hand, exactly the server preflight judged, with the probe.

Same argv, same environment additions (a profile's [env] and --env), on the host named: for a remote
host the probe folder is the versioned copy `dynspec launch` puts there (~/.dynspec/probe/<digest>),
spelled `"$HOME"/...` so the host's shell expands it. Secrets are never in the text: an env value
whose name looks secret becomes `NAME="$NAME"`, a secret flag's value `"$VAR"` (`--api-key` reads
OPENAI_API_KEY, the variable sglang.bench_serving and `dynspec prove` read), and `needs` lists the
variables the pasting shell must hold."""
from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from dynspec_cli.run.secrets import SECRET_FLAGS, is_secret

# the variable a secret flag's value is read from in the printed command
FLAG_VARIABLES = {"--api-key": "OPENAI_API_KEY", "--admin-api-key": "SGLANG_ADMIN_API_KEY", "--hf-token": "HF_TOKEN"}


@dataclass
class StartCommand:
    line: str  # POSIX sh
    needs: list[str] = field(default_factory=list)  # variables the pasting shell must hold
    probe_dir: str = ""  # where the probe folder must be on the host
    copy: Optional[str] = None  # how to put it there (remote hosts)


def probe_digest(files: Mapping[str, bytes]) -> str:
    """The version of the probe folder: its remote copy lives in ~/.dynspec/probe/<digest>."""
    return hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:12]


def _flag_variable(flag: str) -> str:
    return FLAG_VARIABLES.get(flag) or flag.lstrip("-").replace("-", "_").upper()


def _argv_words(argv: Sequence[str], env: Mapping[str, str], needs: list[str]) -> list[str]:
    secret_values = {v: k for k, v in env.items() if is_secret(k) and v}
    out, var = [], None
    for a in argv:
        if var is not None:
            out.append(f'"${var}"')
            needs.append(var)
            var = None
            continue
        flag, eq, value = a.partition("=")
        if flag.startswith("--") and (flag in SECRET_FLAGS or is_secret(flag[2:].replace("-", "_"))):
            if eq:
                out.append(f'{flag}="${_flag_variable(flag)}"')
                needs.append(_flag_variable(flag))
            else:
                out.append(shlex.quote(a))
                var = _flag_variable(flag)
            continue
        if a in secret_values:  # a secret env value repeated in a flag
            out.append(f'"${secret_values[a]}"')
            needs.append(secret_values[a])
            continue
        out.append(shlex.quote(a))
    return out


def start_command(argv: Sequence[str], env: Mapping[str, str], probe_config: Mapping[str, Any], *,
                  local_probe_dir: str, remote: Optional[str] = None, port: Optional[str] = None,
                  ssh_config: Optional[str] = None, probe_files: Optional[Mapping[str, bytes]] = None) -> StartCommand:
    """argv: the server's whole argv (python -m sglang.launch_server FLAGS); env: what the server's
    environment adds (profile [env], --env); remote: the host (ssh destination) when it is not this
    machine, with its port and ssh_config for the copy command."""
    needs: list[str] = []
    if remote:
        rel = f".dynspec/probe/{probe_digest(probe_files or {})}"
        pdir_word, probe_dir = f'"$HOME"/{rel}', f"~/{rel}"
        cfg = ["-F", ssh_config] if ssh_config else []
        ssh = shlex.join(["ssh", *cfg, *(["-p", port] if port else []), remote, "mkdir", "-p", rel])
        scp = shlex.join(["scp", "-q", *cfg, *(["-P", port] if port else [])])
        copy = f"{ssh} && {scp} {shlex.quote(local_probe_dir)}/*.py {shlex.quote(remote + ':' + rel + '/')}"
    else:
        pdir_word, probe_dir, copy = shlex.quote(local_probe_dir), local_probe_dir, None
    words = []
    for k, v in env.items():
        if k == "PYTHONPATH":
            continue
        if is_secret(k):
            words.append(f'{k}="${k}"')
            needs.append(k)
        else:
            words.append(f"{k}={shlex.quote(v)}")
    # the probe first; then the PYTHONPATH the server gets (the profile's, else the shell's)
    if env.get("PYTHONPATH"):
        words.insert(0, f"PYTHONPATH={pdir_word}:{shlex.quote(env['PYTHONPATH'])}")
    else:
        words.insert(0, f"PYTHONPATH={pdir_word}${{PYTHONPATH:+:$PYTHONPATH}}")
    words.append(f"DYNSPEC_PROBE={shlex.quote(json.dumps(dict(probe_config), separators=(',', ':')))}")
    line = " ".join(words + _argv_words(argv, env, needs))
    return StartCommand(line=line, needs=sorted(set(needs)), probe_dir=probe_dir, copy=copy)

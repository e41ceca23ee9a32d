"""Record what the REAL `python -m sglang.launch_server` of each release prints on this CPU-only machine.

    python -m tests.tools.record_real_logs            # all cases -> tests/fixtures/logs/real-launcher/
    python -m tests.tools.record_real_logs 0.5.9      # only the cases of some releases
    python -m tests.tools.record_real_logs --case 0.5.9/v2-unset-topk4 --out /tmp/x

Each case runs the release from tests.support.sglang_env (real wheel, real deps, no shim) with ``--device cuda``,
patched with tests.support.sglang_patch (in a hard-linked copy) so ``--speculative-disable-batch-threshold 5`` is
accepted, except the ``unpatched-*`` cases which record the real argparse error.  The stand-in model is
MODEL_DIR (a tiny llama ``config.json`` plus a tiny word-level ``tokenizer.json``: 0.5.16+ build the tokenizer
in the main process before the scheduler starts, and transformers 5 cannot invent one).  Each case writes
``<version>/<case>.log`` (combined stdout+stderr, bytes as produced) and ``<case>.json`` (argv, env delta,
exit code, duration, stage reached).  Every run gets its own process group, killed at the end.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support import sglang_env, sglang_patch  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "logs" / "real-launcher"
MODEL_DIR = Path("/tmp/dynspec-model")  # fixed, so the recorded logs are stable
TIMEOUT = 300.0  # a 0.5.16/0.5.23 run takes 40 s alone, ~100 s on a loaded 2-core box
THRESHOLD_ARGS = ["--speculative-disable-batch-threshold", "5"]

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 32,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-06,
    "hidden_act": "silu",
    "torch_dtype": "float16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
_WORDS = "the a of to and in is it that for on with as was at by".split()
TOKENIZER = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
        for i, t in enumerate(["<unk>", "<s>", "</s>"])
    ],
    "normalizer": None,
    "pre_tokenizer": {"type": "Whitespace"},
    "post_processor": None,
    "decoder": None,
    "model": {"type": "WordLevel", "vocab": {**{"<unk>": 0, "<s>": 1, "</s>": 2},
                                             **{w: 3 + i for i, w in enumerate(_WORDS)}},
              "unk_token": "<unk>"},
}
TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                    "unk_token": "<unk>", "model_max_length": 2048}


def ensure_model_dir(path: Path = MODEL_DIR) -> Path:
    """Write the stand-in model dir (idempotent, atomic per file; safe when tests run concurrently)."""
    path.mkdir(parents=True, exist_ok=True)
    for name, obj in (("config.json", LLAMA_CONFIG), ("tokenizer.json", TOKENIZER),
                      ("tokenizer_config.json", TOKENIZER_CONFIG)):
        text = json.dumps(obj, indent=2) + "\n"
        f = path / name
        if not f.is_file() or f.read_text() != text:
            tmp = f.with_name(f"{name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, f)
    return path


# --------------------------------------------------------------------------------------------------
# the matrix


@dataclasses.dataclass(frozen=True)
class Case:
    version: str
    name: str
    env: Dict[str, str]  # SGLANG_* delta
    extra: Sequence[str] = ()  # launcher args after the common speculative flags
    patched: bool = True
    algorithm: str = "EAGLE3"
    expect: Sequence[str] = ()  # substrings that must be in the log (checked by the recorder and the tests)
    reject: Sequence[str] = ()  # substrings that must not be

    @property
    def key(self) -> str:
        return f"{self.version}/{self.name}"

    def launcher_args(self, model: Path = MODEL_DIR) -> List[str]:
        args = ["-m", "sglang.launch_server", "--model-path", str(model), "--device", "cuda",
                "--speculative-algorithm", self.algorithm, "--speculative-draft-model-path", str(model),
                "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", *self.extra]
        return args + THRESHOLD_ARGS


V2ON = {"SGLANG_ENABLE_SPEC_V2": "True"}
V2OFF = {"SGLANG_ENABLE_SPEC_V2": "False"}
TOPK1 = ("--speculative-eagle-topk", "1")
TOPK4 = ("--speculative-eagle-topk", "4")
DOS = ("--disable-overlap-schedule",)
OVERLAP_OFF_059 = "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm."
V2_ON_059 = "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on."
TOPK_ERR_059 = "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding."
V2_DEFAULT_0512 = "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."
V1_BECAUSE = "Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
REMOVED_0516 = "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker."
NON_OVERLAP = "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."
UNRECOGNIZED = "unrecognized arguments: --speculative-disable-batch-threshold"
NO_DRIVER = "Found no NVIDIA driver on your system"

MATRIX: List[Case] = [
    # 0.5.9: spec v2 opt-in (env, default False); bare lastResort warning lines; stops at `import uvicorn`
    Case("0.5.9", "v2-unset-topk4", {}, TOPK4, expect=[OVERLAP_OFF_059, "No module named 'uvicorn'"]),
    Case("0.5.9", "v2-unset-topk1", {}, TOPK1, expect=[OVERLAP_OFF_059], reject=[V2_ON_059]),
    Case("0.5.9", "v2-true-topk1", V2ON, TOPK1, expect=[V2_ON_059, "No module named 'uvicorn'"],
         reject=[OVERLAP_OFF_059]),
    Case("0.5.9", "v2-true-topk4", V2ON, TOPK4, expect=[V2_ON_059, TOPK_ERR_059], reject=["uvicorn"]),
    Case("0.5.9", "v2-true-topk1-disable-overlap", V2ON, TOPK1 + DOS, expect=[V2_ON_059]),
    Case("0.5.9", "v2-unset-topk4-disable-overlap", {}, TOPK4 + DOS, expect=[OVERLAP_OFF_059]),
    Case("0.5.9", "nextn-v2-true-topk1", V2ON, TOPK1, algorithm="NEXTN", expect=[V2_ON_059]),
    Case("0.5.9", "unpatched-v2-unset-topk4", {}, TOPK4, patched=False, expect=[UNRECOGNIZED],
         reject=[OVERLAP_OFF_059]),
    # 0.5.12.post1: spec v2 on by default (env), timestamped warnings; stops at the sgl_kernel import
    Case("0.5.12.post1", "v2-unset-topk1", {}, TOPK1, expect=[V2_DEFAULT_0512, "No module named 'sgl_kernel'"]),
    Case("0.5.12.post1", "v2-unset-topk4", {}, TOPK4,
         expect=[V1_BECAUSE + "spec v2 currently only supports topk = 1."], reject=[V2_DEFAULT_0512]),
    Case("0.5.12.post1", "v2-false-topk1", V2OFF, TOPK1, expect=[V1_BECAUSE + "SGLANG_ENABLE_SPEC_V2=False."]),
    Case("0.5.12.post1", "v2-true-topk4", V2ON, TOPK4,
         expect=[V1_BECAUSE + "spec v2 currently only supports topk = 1."]),
    Case("0.5.12.post1", "v2-unset-topk1-disable-overlap", {}, TOPK1 + DOS,
         expect=[V1_BECAUSE + "overlap schedule is disabled."]),
    # 0.5.16: env var removed (warns when set); server_args= dump; scheduler dies at CUDA init
    Case("0.5.16", "v2-true-topk4", V2ON, TOPK4, expect=[REMOVED_0516, "server_args=ServerArgs(", NO_DRIVER]),
    Case("0.5.16", "v2-unset-topk1-disable-overlap", {}, TOPK1 + DOS,
         expect=[NON_OVERLAP, "server_args=ServerArgs("], reject=[REMOVED_0516]),
    # 0.5.23: env var silently ignored; server_args={...} dump; scheduler dies at CUDA init
    Case("0.5.23", "v2-true-topk4", V2ON, TOPK4, expect=["server_args={", NO_DRIVER],
         reject=["SGLANG_ENABLE_SPEC_V2", "Spec v2", "Spec v1", "Overlap scheduler is disabled"]),
    Case("0.5.23", "v2-unset-topk1-disable-overlap", {}, TOPK1 + DOS, expect=[NON_OVERLAP, "server_args={"]),
    Case("0.5.23", "unpatched-v2-unset-topk4", {}, TOPK4, patched=False, expect=[UNRECOGNIZED]),
]
CASES = {c.key: c for c in MATRIX}


# --------------------------------------------------------------------------------------------------
# evidence


_TS = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?P<prefix>[^\]]*)\] ")
EVIDENCE = re.compile(
    r"(Overlap scheduler is disabled|Overlap schedule is not|Overlap spec v2|Spec v2 |Spec v1 |Non-overlap|"
    r"SGLANG_ENABLE_SPEC_V2|Beta spec|Max running requests is reset|speculative_num_draft_tokens is adjusted|"
    r"unrecognized arguments|^ValueError: |^RuntimeError: |^ModuleNotFoundError: |Found no NVIDIA driver|"
    r"Dynamic speculation disable enabled|(?:^|\] )server_args=|error: )"
)


def normalize(line: str) -> str:
    """Drop the `[YYYY-MM-DD HH:MM:SS<prefix>] ` timestamp (keeping a rank prefix as `[<prefix>] `), the
    `server_args=` dump's body, and the sglang install location in paths."""
    m = _TS.match(line)
    if m:
        line = (f"[{m.group('prefix').strip()}] " if m.group("prefix").strip() else "[ts] ") + line[m.end():]
    i = line.find("server_args=")
    if i >= 0 and not line[i:].startswith("server_args=None"):
        line = line[: i + len("server_args=")] + line[i + len("server_args="):][:10] + "..."
    return line.rstrip()


def evidence_lines(text: str) -> List[str]:
    """The lines that carry the verdict evidence, normalised, de-duplicated (child processes repeat
    some), in order of first appearance."""
    out: List[str] = []
    for raw in text.splitlines():
        if EVIDENCE.search(raw) or EVIDENCE.search(normalize(raw)):
            n = normalize(raw)
            if n not in out:
                out.append(n)
    return out


def stage_of(text: str, returncode: Optional[int], timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if "unrecognized arguments" in text:
        return "argparse-error"
    if NO_DRIVER in text:
        return "scheduler-cuda-init"
    m = re.findall(r"^ModuleNotFoundError: No module named '([^']+)'", text, re.M)
    if m:
        return f"import:{m[-1]}"
    m = re.findall(r"^(\w+Error): ", text, re.M)
    if m:
        return f"error:{m[-1]}"
    return "exit" if returncode == 0 else f"exit:{returncode}"


# --------------------------------------------------------------------------------------------------
# running


@dataclasses.dataclass
class Result:
    case: Case
    argv: List[str]
    env_delta: Dict[str, str]
    returncode: int
    duration: float
    timed_out: bool
    output: bytes

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    @property
    def stage(self) -> str:
        return stage_of(self.text, self.returncode, self.timed_out)

    def check(self) -> List[str]:
        """Problems with respect to the case's expectations (empty = as expected)."""
        t = self.text
        return ([f"missing: {s!r}" for s in self.case.expect if s not in t]
                + [f"unexpected: {s!r}" for s in self.case.reject if s in t])


def _clean_env(env: sglang_env.SglangEnv, extra_paths: Sequence[Path], delta: Dict[str, str]) -> Dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME")}
    e = env.env(extra_paths=extra_paths, base=base, PYTHONUNBUFFERED="1")
    e.update(delta)
    return e


def patched_site(env: sglang_env.SglangEnv, root: Path) -> Path:
    """A patched (hard-linked) copy of the release's sglang under root/<version>, rebuilt each time."""
    dest = root / env.version
    env.patched_copy(dest)
    sglang_patch.patch_sglang(dest)
    return dest


def run_case(case: Case, work: Path, timeout: float = TIMEOUT,
             env: Optional[sglang_env.SglangEnv] = None) -> Result:
    env = env or sglang_env.python_for(case.version)
    ensure_model_dir()
    extra: List[Path] = []
    if case.patched:
        extra.append(patched_site(env, work / "patched"))
    full_env = _clean_env(env, extra, case.env)
    argv = [str(env.python), *case.launcher_args()]
    delta = {k: full_env[k] for k in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONUNBUFFERED", *case.env)}
    t0 = time.monotonic()
    timed_out = False
    with open(work / f".{case.version}-{case.name}.out", "w+b") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=full_env, cwd=str(work), start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        finally:
            try:  # the whole group: sglang's schedulers/detokenizer survive their parent otherwise
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if rc is None:
                rc = proc.wait()
        duration = time.monotonic() - t0
        out.seek(0)
        data = out.read()
    os.unlink(work / f".{case.version}-{case.name}.out")
    return Result(case, argv, delta, rc, duration, timed_out, data)


def write_fixture(res: Result, dest: Path = FIXTURES, recorded: Optional[str] = None) -> Path:
    d = dest / res.case.version
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{res.case.name}.log").write_bytes(res.output)
    meta = {
        "case": res.case.name,
        "sglang_version": res.case.version,
        "patched": res.case.patched,
        "argv": res.argv,
        "env_delta": res.env_delta,
        "exit_code": res.returncode,  # Popen returncode: -9 = killed by SIGKILL (sglang kills its own tree)
        "timed_out": res.timed_out,
        "duration_s": round(res.duration, 1),
        "stage": res.stage,
        "evidence": evidence_lines(res.text),
        "recorded": recorded or _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "model_dir": str(MODEL_DIR),
        "expectation_problems": res.check(),
    }
    old = d / f"{res.case.name}.json"
    if old.exists():  # the hand-written expectation is a person's reading: a new recording keeps it
        prev = json.loads(old.read_text()).get("expect")
        if prev is not None:
            meta["expect"] = prev
    (d / f"{res.case.name}.json").write_text(json.dumps(meta, indent=2) + "\n")
    return d / f"{res.case.name}.log"


def reindex(dest: Path = FIXTURES) -> None:
    """Recompute the derived fields (evidence, stage, checks) of existing fixtures from their .log bytes."""
    for meta_path in sorted(dest.glob("*/*.json")):
        meta = json.loads(meta_path.read_text())
        case = CASES[f"{meta['sglang_version']}/{meta['case']}"]
        data = meta_path.with_suffix(".log").read_bytes()
        res = Result(case, meta["argv"], meta["env_delta"], meta["exit_code"], meta["duration_s"],
                     meta["timed_out"], data)
        write_fixture(res, dest, recorded=meta["recorded"])


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="*", help="only these releases")
    ap.add_argument("--case", action="append", default=[], help="VERSION/NAME (repeatable)")
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    ap.add_argument("--work", type=Path, default=sglang_env.cache_root() / "record-work")
    ap.add_argument("--reindex", action="store_true", help="only recompute the .json derived fields from the .logs")
    a = ap.parse_args(argv)
    if a.reindex:
        reindex(a.out)
        return 0
    cases = [CASES[k] for k in a.case] if a.case else [c for c in MATRIX if not a.versions or c.version in a.versions]
    a.work.mkdir(parents=True, exist_ok=True)
    rows = []
    bad = 0
    for c in cases:
        res = run_case(c, a.work, a.timeout)
        write_fixture(res, a.out)
        probs = res.check()
        bad += bool(probs)
        key = next((ln for ln in evidence_lines(res.text) if re.search(
            r"Spec v|Overlap|Non-overlap|SGLANG_ENABLE|unrecognized|ValueError|server_args=", ln)), "")
        rows.append((c.version, c.name, res.returncode, f"{res.duration:.1f}", res.stage, key[:90],
                     "; ".join(probs) or "ok"))
        print(f"{c.key}: exit {res.returncode} in {res.duration:.1f}s, {res.stage}", file=sys.stderr)
    w = [max(len(str(r[i])) for r in rows + [("version", "case", "exit", "secs", "stage", "key line", "check")])
         for i in range(7)]
    for r in [("version", "case", "exit", "secs", "stage", "key line", "check")] + rows:
        print("  ".join(str(x).ljust(w[i]) for i, x in enumerate(r)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# The H200 run (issue 17): on the GPU machine, from the repo root, with the wheelhouse carried in .gpu/:
#     bash gpu/device/run.sh [STAGE...]        (default: every stage, in this order)
# Stages: install model patch jit raw preflight launch prove gate throughput stop noprobe dead
#         (and, not by default: starve adaptive pinned: `bash gpu/device/run.sh install model patch starve jit adaptive pinned`;
#          crash cudagraph: `bash gpu/device/run.sh install model patch jit cudagraph crash`;
#          the patch matrix: matrixd matrixe, or every remaining case at once: par; the per-hunk probe's cost: hunkcost)
# Prints where it got to ([  12.3s] stage ...); everything it gathers goes to $OUT/artifacts.tgz.
set -u -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/dynspec-gpu-out}
W=/tmp/dynspec-gpu            # model, logs, artifacts
A=$W/artifacts
PY=${PY:-/opt/torch/.venv/bin/python3}
PROFILE=gpu/device/tiny-eagle3.toml
PORT=30000
DIFF=gpu/patches/dynamic-spec-disable-0.5.12.post1.diff
T0=$(date +%s%N)
mkdir -p "$OUT" "$A" "$W/logs"
export PYTHONPATH=/tmp/site LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1
say() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[%5d.%01ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"; }
# -P: not the checkout in the current folder but the wheel installed into /tmp/site, as users run it (issue 28)
dynspec() { "$PY" -P -m dynspec_cli "$@"; }
timed() {  # timed NAME CMD... : run, print and record its wall time and exit code
  local name=$1; shift; local s=$(date +%s%N)
  "$@"; local rc=$?
  local ms=$(( ($(date +%s%N) - s) / 1000000 ))
  echo "$name rc=$rc wall_ms=$ms" | tee -a "$A/timings.txt"; return $rc
}
http() { "$PY" -c "import sys,urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$PORT'+sys.argv[1],timeout=30).read().decode())" "$1"; }
finish() { cp -r "$W/logs" "$A/" 2>/dev/null; cp -r ~/.dynspec/runs "$A/records" 2>/dev/null
           tar czf "$OUT/artifacts.tgz" -C "$A" . ; say "artifacts: $(du -h "$OUT/artifacts.tgz" | cut -f1)"; }
trap finish EXIT
trap "say interrupted; exit 143" TERM INT
gone() {  # nothing of the server left?
  sleep 1  # zombies (state Z) are not running: the container's init reaps them late
  if ps -eo stat=,pid=,args= | awk '$1 !~ /^Z/' | grep -E "[s]glang[.]launch_server|[s]glang::"; then
    say "LEFT RUNNING (above)"; return 1; fi
  say "no sglang process left"; }

stage_install() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$A/nvidia-smi.txt"
  timed install "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .gpu/wheels/*.whl || return 1
  "$PY" -c "import torch, sgl_kernel, sglang, dynspec_cli; print('torch', torch.__version__, 'sglang', sglang.__version__, 'sgl_kernel', sgl_kernel.__version__, 'cuda', torch.cuda.is_available())"
  dynspec --version | tee "$A/dynspec-version.txt"  # the tables must be the wheel's, under /tmp/site
}
stage_model() { "$PY" gpu/device/make_model.py "$W/model"; }
stage_jit() {  # flashinfer builds its norm kernels once (nvcc, cached in ~/.cache/flashinfer): before any timing
  timed jit "$PY" -c "import torch, flashinfer.norm as n; x = torch.ones(4, 256, dtype=torch.bfloat16, device='cuda'); n.rmsnorm(x, x[0]); n.fused_add_rmsnorm(x, x.clone(), x[0]); torch.cuda.synchronize(); print('flashinfer norm kernels built')" 2>&1 | tail -25
}
stage_patch() { "$PY" gpu/device/apply_patch.py /tmp/site "$DIFF"; }

stage_raw() {  # the same server without dynspec: the launch-to-ready baseline, and a first request
  local s=$(date +%s%N) args
  args=$("$PY" -c "import tomllib;f=tomllib.load(open('$PROFILE','rb'))['flags'];print(' '.join('--'+k if v is True else f'--{k} {v}' for k,v in f.items()))")
  "$PY" -m sglang.launch_server $args --port $PORT > "$W/logs/raw.log" 2>&1 &
  local pid=$!
  for i in $(seq 1 400); do
    if ! kill -0 $pid 2>/dev/null; then say "raw server exited"; tail -40 "$W/logs/raw.log"; return 1; fi
    if "$PY" -c "import urllib.request;urllib.request.urlopen('http://127.0.0.1:$PORT/health_generate',timeout=5)" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "raw_ready wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" | tee -a "$A/timings.txt"
  "$PY" -c "import urllib.request as u;print(u.urlopen(u.Request('http://127.0.0.1:$PORT/generate',data=b'{\"input_ids\":[10,11,12,13],\"sampling_params\":{\"max_new_tokens\":16,\"temperature\":0}}',headers={'Content-Type':'application/json'}),timeout=60).read().decode())" | tee "$A/raw-generate.json"
  http /server_info > "$A/raw-server_info.json"; http /metrics > "$A/raw-metrics.txt"
  kill -INT $pid; wait $pid; gone
}
stage_preflight() {
  timed preflight dynspec preflight "$PROFILE" | tee "$A/preflight.txt"
  dynspec preflight "$PROFILE" --json > "$A/preflight.json"
}
stage_launch() {
  timed launch dynspec launch "$PROFILE" 2>&1 | tee "$A/launch.txt"
  http /server_info > "$A/server_info.json"; http /metrics > "$A/metrics-after-launch.txt"
  grep -a "DYNSPEC-PROBE" "$W/logs/tiny-eagle3.log" > "$A/probe-lines.txt"; wc -l < "$A/probe-lines.txt"
  dynspec verify "$W/logs/tiny-eagle3.log" --json > "$A/verify-launch.json"; echo "verify rc=$?"
}
stage_prove() {
  timed prove dynspec prove tiny-eagle3 --steps 1,5,6,10 --duration 8 --max-new-tokens 128 \
    --report "$A/prove" 2>&1 | tee "$A/prove.txt"
  http /metrics > "$A/metrics-after-prove.txt"
}
stage_gate() { timed gate dynspec gate tiny-eagle3 2>&1 | tee "$A/gate.txt"; }
stage_throughput() { "$PY" gpu/device/throughput.py $PORT --concurrency 4 --duration 15 | tee "$A/throughput-probe.json"; }
stage_stop() { timed stop dynspec stop tiny-eagle3 2>&1 | tee "$A/stop.txt"; dynspec status 2>&1 | tee "$A/status.txt"; gone; }
stage_noprobe() {
  timed launch_noprobe dynspec launch "$PROFILE" --no-probe --name tiny-noprobe 2>&1 | tee "$A/launch-noprobe.txt"
  "$PY" gpu/device/throughput.py $PORT --concurrency 4 --duration 15 | tee "$A/throughput-noprobe.json"
  dynspec stop tiny-noprobe; gone
}
stage_dead() {  # spec v2 off on 0.5.12.post1: EAGLEWorker (V1) runs, the patch in EAGLEWorkerV2 is dead code
  SGLANG_ENABLE_SPEC_V2=False timed preflight_dead dynspec preflight "$PROFILE" 2>&1 | tee "$A/preflight-dead.txt"
  timed launch_dead dynspec launch "$PROFILE" --no-preflight --env SGLANG_ENABLE_SPEC_V2=False --name tiny-dead \
    2>&1 | tee "$A/launch-dead.txt"
  grep -c -a "Load weight end" "$W/logs/tiny-dead.log" | sed 's/^/weights loaded lines in the dead log: /'
  gone
}

# Issue 20 on the real server: sglang's adaptive speculation under `dynspec guard`, healthy, then with its
# controller starved (starve_adaptive.py: the verify path no longer feeds it; gated on an env variable).
ADAPTIVE=gpu/device/tiny-eagle3-adaptive.toml
stage_starve() { "$PY" gpu/device/starve_adaptive.py /tmp/site; }
guarded() {  # guarded NAME: prove, a warm-up, then 30 s of load at concurrency 2 under guard (5 s windows)
  local name=$1
  "$PY" gpu/device/throughput.py $PORT --concurrency 1 --duration 5 > /dev/null  # the controller settles
  timed "prove_$name" dynspec prove "$name" --steps 1,5,6,10 --duration 8 --max-new-tokens 128 \
    --report "$A/prove-$name" 2>&1 | tail -25 | tee "$A/prove-$name.txt"
  timed "guard_$name" dynspec guard "$name" --window 5 --report "$A/guard-$name.json" -- \
    "$PY" gpu/device/throughput.py $PORT --concurrency 2 --duration 30 > "$A/guard-$name.out" 2> "$A/guard-$name.err"
  tail -30 "$A/guard-$name.err"; cat "$A/guard-$name.out"
  http /metrics | grep -E "^sglang:spec_(accept_length|num_steps)" | tee "$A/metrics-$name.txt"
  grep -a -E "Adaptive|adaptive" "$W/logs/$name.log" | tail -12
  timed "stop_$name" dynspec stop "$name" 2>&1 | tail -3; gone
}
stage_adaptive() {
  timed launch_adaptive dynspec launch "$ADAPTIVE" 2>&1 | tail -15 | tee "$A/launch-adaptive.txt"
  guarded tiny-adaptive
}
stage_pinned() {
  timed launch_pinned dynspec launch "$ADAPTIVE" --name tiny-pinned --env DYNSPEC_GPU_STARVE_ADAPTIVE=1 2>&1 | tail -15 \
    | tee "$A/launch-pinned.txt"
  guarded tiny-pinned
}

# Issue 29 on the real server: a proven, serving server whose scheduler is SIGKILLed. sglang's launcher
# logs "Subprocess scheduler_0 (pid=N) crashed with exit code -9" and SIGQUITs itself: verify must say crashed.
# (A clean `dynspec stop` logs the same line with -15 after "SIGTERM received": a stop, see stage stop.)
stage_crash() {
  timed launch_crash dynspec launch "$PROFILE" --name tiny-crash 2>&1 | tail -12 | tee "$A/launch-crash.txt"
  "$PY" gpu/device/throughput.py $PORT --concurrency 2 --duration 5 | tee "$A/throughput-crash.json"
  local sched; sched=$(pgrep -f "sglang::scheduler" | head -1)
  say "SIGKILL scheduler pid $sched"; kill -9 "$sched"; sleep 8
  timed verify_crash dynspec verify "$W/logs/tiny-crash.log" 2>&1 | tail -20 | tee "$A/verify-crash.txt"
  dynspec verify "$W/logs/tiny-crash.log" --json > "$A/verify-crash.json"
  dynspec status tiny-crash 2>&1 | head -3 | tee "$A/status-crash.txt"
  dynspec stop tiny-crash 2>&1 | tail -2; gone
}

# Issue 31 on the real server: decode in CUDA graphs or eager. --cuda-graph-max-bs 4 at concurrency 2 and 8
# (above 4 running requests the captured graphs do not fit), then --disable-cuda-graph; /metrics after each load.
cg_load() {  # cg_load NAME CONC
  "$PY" gpu/device/throughput.py $PORT --concurrency "$2" --duration 15 --max-new-tokens 128 | tee "$A/throughput-$1-c$2.json"
  http /metrics > "$A/metrics-$1-c$2.txt"; grep -E "^sglang:(cuda_graph_passes_total|is_cuda_graph)" "$A/metrics-$1-c$2.txt"
}
stage_cudagraph() {
  timed launch_cg4 dynspec launch "$PROFILE" --name tiny-cg4 --set cuda-graph-max-bs=4 2>&1 | tail -8 | tee "$A/launch-cg4.txt"
  http /server_info > "$A/server_info-cg4.json"
  cg_load cg4 2; cg_load cg4 8
  dynspec verify "$W/logs/tiny-cg4.log" --json > "$A/verify-cg4.json"
  dynspec stop tiny-cg4 2>&1 | tail -1; gone
  timed launch_eager dynspec launch "$PROFILE" --name tiny-eager --set disable-cuda-graph=true 2>&1 | tail -8 \
    | tee "$A/launch-eager.txt"
  cg_load eager 2; cg_load eager 8
  dynspec verify "$W/logs/tiny-eager.log" --json > "$A/verify-eager.json"
  dynspec stop tiny-eager 2>&1 | tail -1; gone
}

# Issue 29's matrix on the real server: one placement of the feature per diff (gpu/patches/README.md has the
# truth expected from reading sglang's code). Each case gets its own pristine sglang under /tmp/site-CASE, first
# on the server's PYTHONPATH; launched past preflight so that the server shows what the patch really does.
matrix_case() {  # matrix_case LETTER DIFF
  local c=$1 diff=$2 site=/tmp/site-$1 name=tiny-m$1
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" .gpu/wheels/sglang-0.5.12.post1-*.whl
  "$PY" gpu/device/apply_patch.py "$site" "$diff"
  PYTHONPATH=$site:/tmp/site timed "preflight_m$c" dynspec preflight "$PROFILE" --patch "$diff" --json > "$A/preflight-m$c.json"
  PYTHONPATH=$site:/tmp/site dynspec preflight "$PROFILE" --patch "$diff" 2>&1 | tail -14 | tee "$A/preflight-m$c.txt"
  timed "launch_m$c" dynspec launch "$PROFILE" --no-preflight --name $name --timeout 120 --env PYTHONPATH=$site:/tmp/site \
    2>&1 | tail -10 | tee "$A/launch-m$c.txt"
  timed "prove_m$c" dynspec prove $name --steps 1,5,6,10 --duration 6 --max-new-tokens 128 --report "$A/prove-m$c" \
    2>&1 | tail -16 | tee "$A/prove-m$c.txt"
  dynspec stop $name 2>&1 | tail -1; gone
  timed "verify_m$c" dynspec verify "$W/logs/$name.log" --json > "$A/verify-m$c.json"
  dynspec verify "$W/logs/$name.log" 2>&1 | grep -E "DEAD|LIVE|CRASH|INCONCL|DS3|DS2|effect" | head -8
}
stage_matrixd() { matrix_case d gpu/patches/d-behaviour-in-v1-draft-0.5.12.post1.diff; }
stage_matrixe() { matrix_case e gpu/patches/e-only-server-args-0.5.12.post1.diff; }

# Issue 29's matrix, every remaining case in one go (the device time is short): each case on its own pristine
# sglang (/tmp/site-CASE first on PYTHONPATH), its own port and run name, all launched together on the one GPU.
# Every server, the two "b" ones included, gets --mem-fraction-static 0.5 (sglang's start-up check wants
# avail > total * (1 - f) while the others already hold memory) and --max-total-tokens 65536 (a 256 MiB KV pool,
# so that six fit). Then: prove the four matrix servers at once, stop them, verify each finished log; and the
# per-hunk probe's cost (b's diff launched with --patch: the probe watches its hunks) against the same server with
# no probe, measured alternately A B A B on the quiet GPU.
PAR=/tmp/dynspec-gpu/par
par_profile() {  # par_profile NAME PORT [sed expressions...] -> $PAR/NAME.toml
  local name=$1 port=$2; shift 2
  mkdir -p "$PAR"
  sed -e "s/^name = .*/name = \"$name\"/" -e "s/^port = .*/port = $port/" \
      -e "s/^mem-fraction-static = .*/mem-fraction-static = 0.5/" "$@" "$PROFILE" > "$PAR/$name.toml"
  echo 'max-total-tokens = 65536' >> "$PAR/$name.toml"   # [flags] is the profile's last table
}
par_site() {  # par_site CASE DIFF: a pristine sglang with the case's diff
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "/tmp/site-$1" .gpu/wheels/sglang-0.5.12.post1-*.whl &&
    "$PY" gpu/device/apply_patch.py "/tmp/site-$1" "$2" > "$A/apply-m$1.txt" 2>&1
}
stage_par() {
  local P=gpu/patches; local DA=$P/a-marker-and-behaviour-in-draft-0.5.12.post1.diff DE=$P/e-only-server-args-0.5.12.post1.diff
  local DF=$P/f-plugin-0.5.12.post1.diff FF=$PWD/gpu/patches/f-plugin-feature.toml
  stage_jit & par_site a "$DA" & par_site c "$DIFF" & par_site e "$DE" & par_site f "$DF" & wait
  cat "$A"/apply-m*.txt
  par_profile tiny-ma 31000
  par_profile tiny-mc 33000 -e 's/^speculative-algorithm = .*/speculative-algorithm = "STANDALONE"/' \
    -e 's|^speculative-draft-model-path = .*|speculative-draft-model-path = "/tmp/dynspec-gpu/model/target"|'
  par_profile tiny-me 35000
  par_profile tiny-mf 37000 -e "s|^feature = .*|feature = \"$FF\"|"
  par_profile tiny-hunks 39000
  par_profile tiny-bare 41000
  local c d
  for c in a c e f; do
    d=$DA; [ $c = c ] && d=$DIFF; [ $c = e ] && d=$DE; [ $c = f ] && d=$DF
    PYTHONPATH=/tmp/site-$c:/tmp/site timed "preflight_m$c" dynspec preflight "$PAR/tiny-m$c.toml" --patch "$d" --json \
      > "$A/preflight-m$c.json"
    PYTHONPATH=/tmp/site-$c:/tmp/site dynspec preflight "$PAR/tiny-m$c.toml" --patch "$d" > "$A/preflight-m$c.txt" 2>&1
    tail -4 "$A/preflight-m$c.txt"
  done
  # e: launch as a user would (preflight first): it refuses; the truth needs the server, so launch it past preflight
  PYTHONPATH=/tmp/site-e:/tmp/site timed launch_me_refused dynspec launch "$PAR/tiny-me.toml" --patch "$DE" \
    --env PYTHONPATH=/tmp/site-e:/tmp/site > "$A/launch-me-refused.txt" 2>&1; tail -3 "$A/launch-me-refused.txt"
  say "launching six servers"
  PYTHONPATH=/tmp/site-a:/tmp/site timed launch_ma dynspec launch "$PAR/tiny-ma.toml" --patch "$DA" --timeout 120 \
    --env PYTHONPATH=/tmp/site-a:/tmp/site > "$A/launch-ma.txt" 2>&1 &
  PYTHONPATH=/tmp/site-c:/tmp/site timed launch_mc dynspec launch "$PAR/tiny-mc.toml" --patch "$DIFF" --timeout 120 \
    --env PYTHONPATH=/tmp/site-c:/tmp/site > "$A/launch-mc.txt" 2>&1 &
  timed launch_me dynspec launch "$PAR/tiny-me.toml" --no-preflight --patch "$DE" --timeout 120 \
    --env PYTHONPATH=/tmp/site-e:/tmp/site > "$A/launch-me.txt" 2>&1 &
  PYTHONPATH=/tmp/site-f:/tmp/site timed launch_mf dynspec launch "$PAR/tiny-mf.toml" --patch "$DF" --timeout 120 \
    --env PYTHONPATH=/tmp/site-f:/tmp/site > "$A/launch-mf.txt" 2>&1 &
  timed launch_hunks dynspec launch "$PAR/tiny-hunks.toml" --patch "$DIFF" --timeout 120 > "$A/launch-hunks.txt" 2>&1 &
  timed launch_bare dynspec launch "$PAR/tiny-bare.toml" --no-probe --timeout 120 > "$A/launch-bare.txt" 2>&1 &
  wait
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee "$A/par-memory.txt"
  for c in ma mc me mf hunks bare; do say "launch $c:"; tail -4 "$A/launch-$c.txt"; done
  say "proving the four matrix servers"
  for c in ma mc me mf; do
    timed "prove_$c" dynspec prove "tiny-$c" --steps 1,5,6,10 --duration 4 --max-new-tokens 128 --report "$A/prove-$c" \
      > "$A/prove-$c.txt" 2>&1 &
  done
  wait
  for c in ma mc me mf; do say "prove $c:"; grep -E "PROVEN|FAILED|NOT|^ +[0-9]+ +[0-9]+ " "$A/prove-$c.txt" | head -8; done
  for c in ma mc me mf; do dynspec stop "tiny-$c" > /dev/null 2>&1 & done; wait
  for c in ma mc me mf; do
    timed "verify_$c" dynspec verify "$W/logs/tiny-$c.log" --json > "$A/verify-$c.json"
    dynspec verify "$W/logs/tiny-$c.log" > "$A/verify-$c.txt" 2>&1; head -3 "$A/verify-$c.txt"
  done
  say "the per-hunk probe's cost: alternately, 6 s at concurrency 4 each"
  for round in 1 2; do
    for c in hunks:39000 bare:41000; do
      "$PY" gpu/device/throughput.py "${c#*:}" --concurrency 4 --duration 6 | sed "s/^/${c%%:*} round $round /" \
        | tee -a "$A/throughput-hunks-vs-bare.txt"
    done
  done
  grep -a '"event":"hunk"' "$W/logs/tiny-hunks.log" | head -5 > "$A/probe-hunk-lines.txt"; wc -l < "$A/probe-hunk-lines.txt"
  dynspec verify "$W/logs/tiny-hunks.log" --json > "$A/verify-hunks.json"
  dynspec stop tiny-hunks > /dev/null 2>&1 & dynspec stop tiny-bare > /dev/null 2>&1 & wait
  cp "$PAR"/*.toml "$A/" ; gone
}

# The per-hunk probe's cost alone (issue 29 asks under 1%): b's diff launched with --patch (the probe watches
# its hunks), the same server without a probe (bare) and a second one without (bare2: what two probe-less
# servers differ by, the A/A floor of this very run). Each round gives every server the same fixed work
# (throughput.py --requests), one after the other in a rotating order, after one warm-up round each; at
# concurrency 4 (below the threshold) and 8 (above it: the behaviour hunk's lines run). hunkcost_summary.py
# turns the rounds into ratios per round with a 95% interval, and adds the servers' own Decode batch lines.
# HC_ROUNDS="10 6": rounds at 4 and 8; HC_REQ="24 8": requests per client in a round at 4 and 8.
# HC_WITH_C=1 also launches matrix case c on the final code beside them (STANDALONE overriding the marker's
# __init__: live, issue 29), proves and verifies it and stops it before the first timed round.
stage_hunkcost() {
  local servers=(hunks bare bare2) ports=(39000 41000 43000) i
  par_profile tiny-hunks 39000; par_profile tiny-bare 41000; par_profile tiny-bare2 43000
  if [ "${HC_WITH_C:-0}" = 1 ]; then
    par_site c "$DIFF"
    par_profile tiny-mc 33000 -e 's/^speculative-algorithm = .*/speculative-algorithm = "STANDALONE"/' \
      -e 's|^speculative-draft-model-path = .*|speculative-draft-model-path = "/tmp/dynspec-gpu/model/target"|'
    PYTHONPATH=/tmp/site-c:/tmp/site timed preflight_mc dynspec preflight "$PAR/tiny-mc.toml" --patch "$DIFF" \
      > "$A/preflight-mc.txt" 2>&1; tail -4 "$A/preflight-mc.txt"
    PYTHONPATH=/tmp/site-c:/tmp/site timed launch_mc dynspec launch "$PAR/tiny-mc.toml" --patch "$DIFF" --timeout 150 \
      --env PYTHONPATH=/tmp/site-c:/tmp/site > "$A/launch-mc.txt" 2>&1 &
  fi
  say "launching ${servers[*]}"
  timed launch_hunks dynspec launch "$PAR/tiny-hunks.toml" --patch "$DIFF" --timeout 180 > "$A/launch-hunks.txt" 2>&1 &
  timed launch_bare dynspec launch "$PAR/tiny-bare.toml" --no-probe --timeout 180 > "$A/launch-bare.txt" 2>&1 &
  timed launch_bare2 dynspec launch "$PAR/tiny-bare2.toml" --no-probe --timeout 180 > "$A/launch-bare2.txt" 2>&1 &
  wait; tail -n 2 "$A"/launch-hunks.txt "$A"/launch-bare*.txt
  if [ "${HC_WITH_C:-0}" = 1 ]; then
    tail -n 6 "$A/launch-mc.txt"
    timed prove_mc dynspec prove tiny-mc --steps 1,5,6,10 --duration 4 --max-new-tokens 128 --report "$A/prove-mc" \
      > "$A/prove-mc.txt" 2>&1; grep -E "PROVEN|FAILED|NOT|^ +[0-9]+ +[0-9]+ " "$A/prove-mc.txt" | head -8
    timed stop_mc dynspec stop tiny-mc > /dev/null 2>&1
    timed verify_mc dynspec verify "$W/logs/tiny-mc.log" --json > "$A/verify-mc.json"
    dynspec verify "$W/logs/tiny-mc.log" > "$A/verify-mc.txt" 2>&1; head -4 "$A/verify-mc.txt"
  fi
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader | tee "$A/hunkcost-memory.txt"
  local rounds=(${HC_ROUNDS:-10 6}) reqs=(${HC_REQ:-24 8}) conc n q r k
  for i in 0 1 2; do  # warm-up, not counted: each server's first requests at both concurrencies
    "$PY" gpu/device/throughput.py "${ports[$i]}" --concurrency 4 --requests 2 > /dev/null
    "$PY" gpu/device/throughput.py "${ports[$i]}" --concurrency 8 --requests 1 > /dev/null
  done
  for conc in 4 8; do
    n=${rounds[0]} q=${reqs[0]}; [ $conc = 8 ] && n=${rounds[1]} q=${reqs[1]}
    say "concurrency $conc: $n rounds of $q requests per client, ${servers[*]} in a rotating order"
    for r in $(seq 1 "$n"); do
      for k in 0 1 2; do
        i=$(( (r + k) % 3 ))
        "$PY" gpu/device/throughput.py "${ports[$i]}" --concurrency $conc --requests "$q" \
          | sed "s/^/${servers[$i]} c$conc round $r /" | tee -a "$A/hunkcost.txt"  # printed as it goes
      done
    done
  done
  "$PY" gpu/device/hunkcost_summary.py "$A/hunkcost.txt" --log "hunks=$W/logs/tiny-hunks.log" \
    --log "bare=$W/logs/tiny-bare.log" --log "bare2=$W/logs/tiny-bare2.log" | tee "$A/hunkcost-summary.txt"
  grep -a '"event":"hunk"\|"calls":">=' "$W/logs/tiny-hunks.log" > "$A/probe-hunk-lines.txt"; wc -l < "$A/probe-hunk-lines.txt"
  dynspec verify "$W/logs/tiny-hunks.log" > "$A/verify-hunks.txt" 2>&1; head -3 "$A/verify-hunks.txt"
  for i in 0 1 2; do dynspec stop "tiny-${servers[$i]}" > /dev/null 2>&1 & done; wait
  cp "$PAR"/*.toml "$A/"; gone
}

# Issue 32 (a machine of two GPUs only: `bash gpu/device/run.sh install model patch jit tp2 dpattn rank1dead`);
# what each stage should show is written down before the run in gpu/device/TWO-GPU.md.
TP2=gpu/device/tiny-eagle3-tp2.toml
stage_tp2() {
  nvidia-smi -L | tee "$A/gpus.txt"
  timed preflight_tp2 dynspec preflight "$TP2" --patch "$DIFF" --json > "$A/preflight-tp2.json"
  timed launch_tp2 dynspec launch "$TP2" 2>&1 | tail -14 | tee "$A/launch-tp2.txt"
  grep -a "DYNSPEC-PROBE" "$W/logs/tiny-tp2.log" > "$A/probe-lines-tp2.txt"
  timed prove_tp2 dynspec prove tiny-tp2 --steps 1,5,6,10 --duration 8 --max-new-tokens 128 --report "$A/prove-tp2" \
    2>&1 | tail -16 | tee "$A/prove-tp2.txt"
  timed gate_tp2 dynspec gate tiny-tp2 2>&1 | tee "$A/gate-tp2.txt"
  timed guard_tp2 dynspec guard tiny-tp2 --window 5 --report "$A/guard-tp2.json" -- \
    "$PY" gpu/device/throughput.py $PORT --concurrency 2 --duration 20 > "$A/guard-tp2.out" 2> "$A/guard-tp2.err"
  tail -12 "$A/guard-tp2.err"; http /metrics > "$A/metrics-tp2.txt"
  timed stop_tp2 dynspec stop tiny-tp2 2>&1 | tail -2; gone; nvidia-smi --query-compute-apps=pid --format=csv,noheader | tee "$A/gpu-procs-after-stop.txt"
}
stage_dpattn() {
  timed launch_dpattn dynspec launch "$TP2" --name tiny-dpattn --set enable-dp-attention=true --set dp-size=2 2>&1 | tail -14 \
    | tee "$A/launch-dpattn.txt"
  if dynspec status tiny-dpattn 2>&1 | grep -q alive; then
    timed guard_dpattn dynspec guard tiny-dpattn --window 5 --report "$A/guard-dpattn.json" -- \
      "$PY" gpu/device/throughput.py $PORT --concurrency 4 --duration 20 > "$A/guard-dpattn.out" 2> "$A/guard-dpattn.err"
    tail -12 "$A/guard-dpattn.err"; http /metrics > "$A/metrics-dpattn.txt"
  fi
  dynspec stop tiny-dpattn 2>&1 | tail -1; gone
}
stage_rank1dead() {  # rank 1's scheduler killed while serving: launch/guard must name the rank
  timed launch_r1 dynspec launch "$TP2" --name tiny-r1 2>&1 | tail -6 | tee "$A/launch-r1.txt"
  local r1; r1=$(pgrep -f "sglang::scheduler_TP1" | head -1); say "SIGKILL TP1 scheduler pid $r1"
  ( sleep 8; kill -9 "$r1" ) &
  timed guard_r1 dynspec guard tiny-r1 --window 5 --report "$A/guard-r1.json" -- \
    "$PY" gpu/device/throughput.py $PORT --concurrency 2 --duration 20 > "$A/guard-r1.out" 2> "$A/guard-r1.err"
  tail -12 "$A/guard-r1.err"; dynspec verify "$W/logs/tiny-r1.log" 2>&1 | tail -12 | tee "$A/verify-r1.txt"
  dynspec stop tiny-r1 2>&1 | tail -1; gone
}

STAGES=${*:-install model patch jit raw preflight launch prove gate throughput stop noprobe dead}
for s in $STAGES; do
  say "stage $s"
  "stage_$s" || { say "stage $s FAILED"; [ "$s" = install ] && exit 1; }
done
say "done"

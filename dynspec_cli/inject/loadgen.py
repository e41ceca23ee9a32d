"""dynspec load generator: bounded traffic against one sglang or vLLM server, for `dynspec prove`.

Runs inside someone else's interpreter (the server's host, sent as ``python - '<json>'`` over SSH or
locally), so: stdlib only, Python 3.8+, nothing from dynspec. Prints exactly one JSON document on
stdout, also when it fails (``"ok": false`` with ``error`` and ``exception_traceback``) and when it
is stopped by SIGTERM/SIGINT (then at once, with what was collected so far, ``"stop_reason":
"signal"``). It stops by itself at ``duration`` seconds or after ``max_requests`` requests.

Input: one JSON object as argv[1]::

    base            str    http://127.0.0.1:PORT (the only server it talks to)
    mode            str    "load" (default) or "info" (only /server_info and /metrics, no traffic)
    concurrency     int    client threads, each with one request in flight
    duration        float  seconds of traffic (no request starts after it)
    max_requests    int    requests in all (0 = no bound)
    max_new_tokens  int    per request (ignore_eos, so each request generates exactly this many)
    prompt          str    the prompt text (sent as token ids, its UTF-8 bytes, to a server started with
                           --skip-tokenizer-init: such a server takes only input_ids)
    request_timeout float  seconds per request (default 120)
    drain           float  seconds to wait for requests in flight after `duration` (default 30)
    sample_every    float  seconds between /metrics samples while loading (0 = none; default 0.25)
    info_keys       [str]  extra top-level /server_info keys to return (e.g. the feature's flag dest)
    api             str    "generate" (default: POST /generate, GET /server_info: an sglang server) or
                           "openai" (a vLLM server: POST /v1/completions for the model /v1/models
                           names, GET /version); the engine's Serving.api says which

The server's --api-key, when it has one, is not an input: dynspec writes it into the API_KEY line
of this script's text, which travels on stdin, so it never shows on a command line (ps, /proc).

Output (``schema`` = "dynspec-loadgen/1")::

    ok, error, exception_traceback, stop_reason (duration|max_requests|signal|server-unreachable|unauthorized),
    started, ended (time.time()), elapsed, concurrency, issued, completed, failed, errors {message: count},
    requests[] {t0, t1, status, completion_tokens, spec_verify_ct, spec_accept_length, error},
    server_info_before / server_info_after {endpoint, version, speculative_algorithm,
        max_running_requests, avg_spec_accept_length[] (per internal state), keys{}} or null,
    metrics_before / metrics_after {name: value} (sglang:spec_accept_length, ...; sglang:cuda_graph_passes_total: {mode: count}; null: no /metrics),
    samples[] [t, num_running_reqs, spec_accept_length] (only when the pair changed)
"""
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

SCHEMA = "dynspec-loadgen/1"
API_KEY = None  # replaced by dynspec in the text it sends (see the docstring)
METRICS = ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:num_running_reqs",
           "sglang:spec_verify_calls_total", "sglang:num_requests_total", "sglang:generation_tokens_total",
           # vLLM (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py): summed over engine="N"
           "vllm:num_requests_running", "vllm:generation_tokens_total", "vllm:spec_decode_num_drafts_total",
           "vllm:spec_decode_num_accepted_tokens_total")
META = ("completion_tokens", "spec_verify_ct", "spec_accept_length")
_printed = threading.Lock()


class State(object):
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.requests = []
        self.issued = 0
        self.errors = {}
        self.samples = []
        self.stop_reason = None
        self.doc = {"schema": SCHEMA, "ok": True, "error": None, "exception_traceback": None,
                    "stop_reason": None, "started": time.time(), "ended": None, "elapsed": None,
                    "concurrency": int(args.get("concurrency") or 0), "issued": 0, "completed": 0, "failed": 0,
                    "errors": {}, "requests": [], "server_info_before": None, "server_info_after": None,
                    "metrics_before": None, "metrics_after": None, "samples": []}
        self.t0 = time.monotonic()

    def finish(self, reason=None):
        """The JSON document, printed once, then exit."""
        if not _printed.acquire(False):
            return
        d = self.doc
        with self.lock:
            reqs = list(self.requests)
            d["errors"] = dict(self.errors)
            d["issued"] = self.issued
            d["samples"] = list(self.samples)
        d["stop_reason"] = reason or self.stop_reason or d["stop_reason"]
        d["requests"] = reqs
        d["completed"] = sum(1 for r in reqs if r.get("status") == 200)
        d["failed"] = len(reqs) - d["completed"]
        d["ended"] = time.time()
        d["elapsed"] = round(time.monotonic() - self.t0, 3)
        data = json.dumps(d)
        try:
            sys.stdout.write(data + "\n")
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - nobody is reading any more
            pass
        os._exit(0 if d["ok"] else 1)


def _headers(extra=None):
    h = dict(extra or {})
    if API_KEY:
        h["Authorization"] = "Bearer " + API_KEY
    return h


def _get(url, timeout):
    with urllib.request.urlopen(urllib.request.Request(url, headers=_headers()), timeout=timeout) as r:
        return r.status, r.read()


def openai_info(base, timeout=10.0):
    """A vLLM server's model (the name requests must give) and version."""
    try:
        _, body = _get(base + "/v1/models", timeout)
        models = json.loads(body.decode("utf-8", "replace")).get("data") or []
    except urllib.error.HTTPError as e:
        return {"endpoint": "/v1/models", "error": "HTTP %d" % e.code}
    except Exception as e:  # noqa: BLE001
        return {"endpoint": "/v1/models", "error": "%s: %s" % (type(e).__name__, e)}
    out = {"endpoint": "/v1/models", "model": models[0].get("id") if models else None, "version": None}
    try:
        out["version"] = json.loads(_get(base + "/version", timeout)[1].decode("utf-8", "replace")).get("version")
    except Exception:  # noqa: BLE001 - the version is a nicety
        pass
    return out


def server_info(base, keys, timeout=10.0, api="generate"):
    if api == "openai":
        return openai_info(base, timeout)
    for path in ("/server_info", "/get_server_info"):
        try:
            status, body = _get(base + path, timeout)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            return {"endpoint": path, "error": "HTTP %d" % e.code}
        except Exception as e:  # noqa: BLE001
            return {"endpoint": path, "error": "%s: %s" % (type(e).__name__, e)}
        try:
            info = json.loads(body.decode("utf-8", "replace"))
        except ValueError:
            return {"endpoint": path, "error": "not JSON"}
        states = info.get("internal_states") or []
        if isinstance(states, dict):
            states = [states]
        avg = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
        mrr = info.get("max_running_requests")
        if mrr is None:
            for s in states:
                if isinstance(s, dict) and s.get("effective_max_running_requests_per_dp") is not None:
                    mrr = s.get("effective_max_running_requests_per_dp")
                    break
        return {"endpoint": path, "version": info.get("version"),
                "skip_tokenizer_init": info.get("skip_tokenizer_init"),
                "speculative_algorithm": info.get("speculative_algorithm"), "max_running_requests": mrr,
                "avg_spec_accept_length": avg, "keys": {k: info.get(k) for k in keys if k in info}}
    return {"endpoint": None, "error": "no /server_info or /get_server_info"}


PASSES = "sglang:cuda_graph_passes_total"  # {mode: count}: decode_cuda_graph | decode_none | prefill_*
_MODE = re.compile(r'[{,]mode="([^"]*)"')


def metrics(base, timeout=5.0):
    try:
        status, body = _get(base + "/metrics", timeout)
    except urllib.error.HTTPError:
        return None  # 404: --enable-metrics is off
    except Exception:  # noqa: BLE001
        return None
    out = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith(("sglang:", "vllm:")):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (ValueError, IndexError):
            continue
        if name == PASSES:  # by mode, summed over the schedulers (0.5.7+; absent before: not reported)
            mode = _MODE.search(line)
            if mode:
                modes = out.setdefault(PASSES, {})
                modes[mode.group(1)] = modes.get(mode.group(1), 0.0) + value
            continue
        if name.startswith("vllm:") and name in METRICS:  # one series per engine: the server's sum
            out[name] = out.get(name, 0.0) + value
        elif name in METRICS and name not in out:  # first series (tp_rank 0)
            out[name] = value
    return out


def worker(st, deadline):
    a = st.args
    base = a["base"]
    prompt = a.get("prompt") or "Tell me about speculative decoding."
    info = st.doc.get("server_info_before") or {}
    source = ({"input_ids": list(bytearray(prompt.encode("utf-8")))} if info.get("skip_tokenizer_init")
              else {"text": prompt})
    sampling = {"max_new_tokens": int(a.get("max_new_tokens") or 128), "temperature": 0, "ignore_eos": True}
    path, body = "/generate", json.dumps(dict(source, sampling_params=sampling)).encode("utf-8")
    if a.get("api") == "openai":  # vLLM's OpenAI server; ignore_eos is one of its sampling extras
        path, body = "/v1/completions", json.dumps({"model": info.get("model"), "prompt": prompt, "temperature": 0,
                                                    "max_tokens": sampling["max_new_tokens"], "ignore_eos": True}).encode("utf-8")
    limit = int(a.get("max_requests") or 0)
    timeout = float(a.get("request_timeout") or 120)
    refused = 0
    while not st.stop.is_set() and time.monotonic() < deadline:
        with st.lock:
            if limit and st.issued >= limit:
                st.stop_reason = st.stop_reason or "max_requests"
                return
            st.issued += 1
        rec = {"t0": time.time(), "t1": None, "status": None, "error": None}
        try:
            req = urllib.request.Request(base + path, data=body,
                                         headers=_headers({"Content-Type": "application/json"}))
            with urllib.request.urlopen(req, timeout=timeout) as r:
                rec["status"] = r.status
                doc = json.loads(r.read().decode("utf-8", "replace"))
            if isinstance(doc, list):
                doc = doc[0] if doc else {}
            meta = doc.get("meta_info") or doc.get("usage") or {}
            for k in META:
                if k in meta:
                    rec[k] = meta[k]
            refused = 0
        except urllib.error.HTTPError as e:
            rec["status"] = e.code
            rec["error"] = "HTTP %d" % e.code
            if e.code == 401:  # no or a wrong API key: every further request would be refused too
                st.stop_reason = "unauthorized"
                st.stop.set()
        except Exception as e:  # noqa: BLE001 - every failure is data
            rec["error"] = "%s: %s" % (type(e).__name__, getattr(e, "reason", None) or e)
            refused += 1
        rec["t1"] = time.time()
        with st.lock:
            st.requests.append(rec)
            if rec["error"]:
                st.errors[rec["error"]] = st.errors.get(rec["error"], 0) + 1
        if refused >= 3:  # the server is gone: do not hammer a dead port for the whole duration
            st.stop_reason = "server-unreachable"
            st.stop.set()
            return
        if rec["error"]:
            time.sleep(0.2)


def _vllm_pair(m, before):
    """(running, 1 + accepted / drafts) between two vLLM samples; 1.0 when tokens were generated
    without a draft; None when nothing was generated."""
    if not before:
        return None
    gen = m.get("vllm:generation_tokens_total", 0) - before.get("vllm:generation_tokens_total", 0)
    drafts = m.get("vllm:spec_decode_num_drafts_total", 0) - before.get("vllm:spec_decode_num_drafts_total", 0)
    acc = m.get("vllm:spec_decode_num_accepted_tokens_total", 0) - before.get("vllm:spec_decode_num_accepted_tokens_total", 0)
    if gen <= 0:
        return None
    return (m["vllm:num_requests_running"], round(1 + acc / drafts, 4) if drafts > 0 else 1.0)


def sampler(st, every):
    base, last, last_counts = st.args["base"], None, None
    while not st.stop.wait(every):
        m = metrics(base, timeout=max(every, 1.0))
        if not m:
            continue
        pair = (m.get("sglang:num_running_reqs"), m.get("sglang:spec_accept_length"))
        if "vllm:num_requests_running" in m:  # vLLM: the mean acceptance length since the last sample
            pair, last_counts = _vllm_pair(m, last_counts), m
            if pair is None:
                continue
        if pair != last and pair[0] is not None:
            with st.lock:
                st.samples.append([round(time.time(), 3), pair[0], pair[1]])
            last = pair


def main(argv):
    args = json.loads(argv[1]) if len(argv) > 1 else {}
    st = State(args)

    def on_signal(signum, frame):
        st.stop.set()
        st.finish("signal")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        base = args["base"].rstrip("/")
        args["base"] = base
        keys = list(args.get("info_keys") or [])
        api = args.get("api") or "generate"
        st.doc["server_info_before"] = server_info(base, keys, api=api)
        st.doc["metrics_before"] = metrics(base)
        if args.get("mode") == "info":
            st.finish("info")
        n = max(1, int(args.get("concurrency") or 1))
        duration = float(args.get("duration") or 10)
        deadline = time.monotonic() + duration
        threads = [threading.Thread(target=worker, args=(st, deadline), daemon=True) for _ in range(n)]
        every = float(args.get("sample_every", 0.25) or 0)
        if every > 0 and st.doc["metrics_before"] is not None:
            threading.Thread(target=sampler, args=(st, every), daemon=True).start()
        for t in threads:
            t.start()
        hard = deadline + float(args.get("drain", 30))
        for t in threads:
            t.join(max(0.0, hard - time.monotonic()))
        if any(t.is_alive() for t in threads):
            st.stop_reason = st.stop_reason or "drain-timeout"
        st.stop_reason = st.stop_reason or "duration"
        st.stop.set()
        st.doc["server_info_after"] = server_info(base, keys, api=api)
        st.doc["metrics_after"] = metrics(base)
    except Exception as e:  # noqa: BLE001 - failure is data
        st.doc["ok"] = False
        st.doc["error"] = "%s: %s" % (type(e).__name__, e)
        st.doc["exception_traceback"] = traceback.format_exc()
    st.finish()


if __name__ == "__main__":
    main(sys.argv)

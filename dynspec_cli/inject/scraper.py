"""Sample a server's /metrics and /server_info every few seconds; one JSON line per sample on stdout.

Runs with the server host's python (3.8+, stdlib only), sent on stdin by `dynspec guard`
(`python -u - ARGS_JSON`), so the requests go to the server's own loopback address, also over SSH.
It stops by itself when nobody reads its output (a write fails) or after `max_seconds`.

ARGS_JSON: {"base": "http://127.0.0.1:PORT", "every": S, "max_seconds": S, "prefix": "sglang:"}

A sample: {"t": unix time, "metrics": [[name, {label: value}, number], ...] or null,
           "metrics_error": null | "HTTP 404" | "...", "info": {"endpoint", "version", "startup_time",
           "avg_spec_accept_length": [per internal state], "error"}}
Every series whose name starts with `prefix` is kept, with its labels (per TP/DP rank).
"""
import json
import re
import sys
import time
import urllib.error
import urllib.request

API_KEY = None  # replaced by dynspec in the text it sends (see the docstring)
_SERIES = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _get(url, timeout):
    headers = {"Authorization": "Bearer " + API_KEY} if API_KEY else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
        return r.read()


ARGS = ("attention_backend", "speculative_draft_attention_backend", "disable_cuda_graph", "disable_decode_cuda_graph",
        "cuda_graph_backend_decode", "cuda_graph_max_bs", "cuda_graph_max_bs_decode")


def metrics(base, prefix, timeout):
    try:
        body = _get(base + "/metrics", timeout)
    except urllib.error.HTTPError as e:
        return None, "HTTP %d" % e.code
    except Exception as e:  # noqa: BLE001 - any failure is a sample without metrics
        return None, "%s: %s" % (type(e).__name__, e)
    out = []
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith(prefix):
            continue
        m = _SERIES.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.append([m.group(1), dict(_LABEL.findall(m.group(2) or "")), value])
    return out, None


def server_info(base, timeout):
    for path in ("/server_info", "/get_server_info"):
        try:
            info = json.loads(_get(base + path, timeout).decode("utf-8", "replace"))
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            return {"endpoint": path, "error": "HTTP %d" % e.code}
        except Exception as e:  # noqa: BLE001
            return {"endpoint": path, "error": "%s: %s" % (type(e).__name__, e)}
        if not isinstance(info, dict):
            return {"endpoint": path, "error": "not a JSON object"}
        states = info.get("internal_states") or []
        if isinstance(states, dict):
            states = [states]
        # the server_args fields of the decode compute path (the guard judges backend changes and
        # whether graphs were switched off); absent fields are left out
        args = dict((k, info[k]) for k in ARGS if k in info)
        return {"endpoint": path, "version": info.get("version"), "startup_time": info.get("startup_time"),
                "avg_spec_accept_length": [s.get("avg_spec_accept_length") if isinstance(s, dict) else None
                                           for s in states], "args": args or None}
    return {"endpoint": None, "error": "no /server_info or /get_server_info"}


def main(argv):
    args = json.loads(argv[1])
    base, every = args["base"].rstrip("/"), float(args.get("every") or 5.0)
    prefix, deadline = args.get("prefix") or "sglang:", time.time() + float(args.get("max_seconds") or 86400 * 7)
    timeout = max(1.0, min(every, 10.0))
    while time.time() < deadline:
        t0 = time.time()
        series, err = metrics(base, prefix, timeout)
        doc = {"t": t0, "metrics": series, "metrics_error": err, "info": server_info(base, timeout)}
        try:
            sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            return 0  # the reader is gone
        time.sleep(max(0.0, t0 + every - time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

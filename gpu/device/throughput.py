"""Decode throughput of a running sglang server (token ids in, greedy, ignore_eos), stdlib only.

    python throughput.py PORT [--concurrency 4] [--duration 15 | --requests N] [--max-new-tokens 256]

Prints one JSON line: requests, generated tokens, seconds, tokens/s.
--duration: each of the concurrency clients sends requests until the time is up (guard's load).
--requests N: each client sends exactly N, so every round does the same work and only its time varies. That
is the mode to compare two servers with: a duration round counts whole requests only, which quantises
tokens/s by one request's worth (about 3% at 4 x 256 tokens) and lets its last requests run past the end.
"""
import argparse
import json
import threading
import time
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--duration", type=float, default=15)
    ap.add_argument("--requests", type=int, default=0, help="requests per client (fixed work); overrides --duration")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    a = ap.parse_args()
    body = json.dumps({"input_ids": list(range(10, 42)), "sampling_params": {
        "max_new_tokens": a.max_new_tokens, "temperature": 0, "ignore_eos": True}}).encode()
    url = f"http://127.0.0.1:{a.port}/generate"
    done, lock = [], threading.Lock()
    start = time.monotonic()
    deadline = start + a.duration

    def worker():
        sent = 0
        while (sent < a.requests) if a.requests else (time.monotonic() < deadline):
            sent += 1
            req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                meta = json.loads(r.read())["meta_info"]
            with lock:
                done.append(meta)

    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - start
    toks = sum(m["completion_tokens"] for m in done)
    accept = [m.get("spec_accept_length") for m in done if m.get("spec_accept_length") is not None]
    print(json.dumps({"concurrency": a.concurrency, "requests": len(done), "tokens": toks,
                      "seconds": round(secs, 2), "tokens_per_s": round(toks / secs, 1),
                      "mean_accept_length": round(sum(accept) / len(accept), 3) if accept else None}))


if __name__ == "__main__":
    main()

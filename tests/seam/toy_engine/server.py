"""The toy server (a stand-in: no model, no GPU): `python -m dynspec_cli.engines.toy.server --model M
--port P` replays the lines of a recorded run (the file TOY_REPLAY names) on stdout, each
TOY_PACE seconds apart, and answers GET /health with 200 once it has written its `ready` line."""
import argparse
import http.server
import os
import sys
import threading
import time

ready = threading.Event()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        ok = self.path == "/health" and ready.is_set()
        self.send_response(200 if ok else 503)
        self.end_headers()
        self.wfile.write(b"ok" if ok else b"starting")

    def log_message(self, *args):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="")
    ap.add_argument("--port", type=int, required=True)
    a, _ = ap.parse_known_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pace = float(os.environ.get("TOY_PACE", "0.05"))
    with open(os.environ["TOY_REPLAY"], encoding="utf-8") as fh:
        for line in fh:
            sys.stdout.write(line)
            sys.stdout.flush()
            if line.rstrip().endswith(" INFO ready"):
                ready.set()
            time.sleep(pace)
    while True:  # serving, until stopped
        time.sleep(1)


if __name__ == "__main__":
    main()

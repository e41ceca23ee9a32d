import signal
import sys
import time

from sglang_standin.srt.entrypoints.engine import _launch_subprocesses


def launch_server(server_args):
    if server_args.sigterm_handler:
        def graceful(signum, frame):
            print("standin: graceful shutdown", flush=True)
            for w in getattr(_launch_subprocesses, "keepalive", ()):
                w.close()  # schedulers stop; multiprocessing joins them at exit
            sys.exit(0)

        signal.signal(signal.SIGTERM, graceful)
    results = _launch_subprocesses(server_args)
    print("standin: schedulers reported %s" % sorted(results), flush=True)
    sys.stderr.write("The server is fired up and ready to roll!" + "\n")
    if server_args.serve_forever:
        while True:
            time.sleep(0.05)
    return server_args.exit_code

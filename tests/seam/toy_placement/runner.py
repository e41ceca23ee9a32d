"""The toy placement's own way of starting a server: `python runner.py STATE LOG CWD ARGV...`,
spawned by the toy in a session of its own. It forks once (the toy reaps the first process at once,
so nothing it started is left a zombie of dynspec), starts the server with its output appended to
LOG, writes {"runner": pid, "server": pid} to STATE, and waits for the server to end."""
import json
import os
import subprocess
import sys

state, log, cwd, *argv = sys.argv[1:]
if os.fork() > 0:
    os._exit(0)
with open(log, "ab") as out:
    server = subprocess.Popen(argv, cwd=cwd or None, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
with open(state + ".tmp", "w") as f:
    json.dump({"runner": os.getpid(), "server": server.pid}, f)
os.replace(state + ".tmp", state)
server.wait()

"""Nothing orphaned when dynspec itself is killed: a guard on the login host cancels the job
dynspec answers for once dynspec is gone."""
from __future__ import annotations

import threading
import time

from dynspec_cli.place.slurm.scheduler import cluster_env
from dynspec_cli.transport import Host, TransportError


# The guard: a detached shell on the login host (its own session: neither a Ctrl-C at the terminal
# nor a dropped SSH connection reaches it). It cancels the job once dynspec is gone: on this
# machine when dynspec's pid is (at once); over SSH when dynspec's heartbeat has been quiet for
# longer than a dropped connection is given to come back. `release` (live, --detach, --keep,
# --no-watch) ends it; `fire` cancels at once. It waits for sbatch's answer (job.id) if need be.
GUARD = r"""d=$1; g=$2; grace=$3; pid=$4; last=; quiet=0
alive() {
  if [ -d /proc/self ]; then
    IFS= read -r l 2>/dev/null </proc/"$1"/stat || return 1
    s=${l##*") "}; s=${s%% *}
    case $s in Z|X|x) return 1;; esac
    return 0
  fi
  kill -0 "$1" 2>/dev/null
}
while :; do
  [ -e "$d/$g.release" ] && exit 0
  [ -e "$d/$g.fire" ] && { why="dynspec stopped watching"; break; }
  if [ -n "$pid" ]; then
    alive "$pid" || { why="dynspec (pid $pid) is gone"; break; }
  else
    beat=$(cat "$d/$g.beat" 2>/dev/null)
    if [ "$beat" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; last=$beat; fi
    [ "$quiet" -ge "$grace" ] && { why="no word from dynspec for ${grace}s"; break; }
  fi
  sleep 1
done
n=0
while [ ! -e "$d/job.id" ] && [ "$n" -lt 120 ]; do sleep 1; n=$((n + 1)); done
jid=$(cat "$d/job.id" 2>/dev/null)
[ -n "$jid" ] || { echo "dynspec guard $g: $why; no job was submitted"; exit 0; }
echo "dynspec guard $g: $why: scancel $jid"
scancel "$jid"
"""
HEARTBEAT_EVERY = 3.0


class Guard:
    """Nothing orphaned when dynspec itself dies (SIGKILL, a crash, a connection that stays down):
    the GUARD shell on the login host, for the job of the job dir `jobdir`."""

    def __init__(self, login: Host, jobdir: str):
        import os
        import uuid

        self.login, self.jobdir = login, jobdir
        self.token = f"guard-{uuid.uuid4().hex[:8]}"
        here = login.shares_local_files  # this machine: dynspec's pid tells
        self.grace = int(login.reconnect_for + 30)
        self._stop = threading.Event()
        self._beat()
        login.spawn_tracked(["sh", "-c", GUARD, "sh", jobdir, self.token, str(self.grace),
                             str(os.getpid()) if here else ""], env=cluster_env(login) or None,
                            log_path=f"{jobdir}/guard.log", pid_file=f"{jobdir}/{self.token}.pid")
        if not here:
            threading.Thread(target=self._beating, daemon=True, name="dynspec-slurm-guard").start()

    def _beat(self) -> None:
        self.login.write_file(f"{self.jobdir}/{self.token}.beat", f"{time.time():.3f}\n".encode())

    def _beating(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY):
            try:
                self._beat()
            except (OSError, TransportError):
                pass  # a drop: the next beat (the guard allows `grace` seconds)

    def release(self) -> None:
        """The job stays (live, --detach, --keep, --no-watch)."""
        self._end("release")

    def fire(self) -> None:
        """Cancel through the guard as well (the caller also cancels and confirms it)."""
        self._end("fire")

    def _end(self, word: str) -> None:
        self._stop.set()
        try:
            self.login.write_file(f"{self.jobdir}/{self.token}.{word}", b"")
        except (OSError, TransportError):
            pass  # unreachable: the guard's heartbeat goes quiet and it cancels the job

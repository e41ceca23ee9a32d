"""The one sequence of every placement: preflight gate -> start -> watch, and what Ctrl-C does at
any moment of it (written here only). A placement (a folder of place/) supplies the steps, the
`Placement` methods of protocol.py; `Screen` shows them while they run; the placement's `render`
shows the `Launched` that comes back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from dynspec_cli.place.protocol import Placement
from dynspec_cli.run import records


@dataclass
class LaunchOptions:
    replace: bool = False
    keep: bool = False  # a dead or crashed server keeps running
    detach: bool = False  # Ctrl-C leaves the server running
    watch: bool = True
    preflight: bool = True
    probe: bool = True
    timeout: Optional[float] = None


@dataclass
class Launched:
    """How a launch or watch ended. kind: refused (preflight dead: nothing started) | started (not
    watched) | watched | interrupted (Ctrl-C: stopped, or left running with detach)."""

    kind: str
    preflight: Optional[dict[str, Any]] = None
    record: Any = None  # interrupted: None when nothing was started
    outcome: Any = None
    stopped: bool = False
    detached: bool = False  # interrupted and left running, as asked
    left: Any = None  # interrupted: why the run may still be running (the placement's words); falsy: nothing
    name: str = ""  # the run's name (also when no record is known)


class Screen(Protocol):
    """What a launch shows while it runs (a placement's renderers, or nothing)."""

    def preflight(self, result: dict[str, Any]) -> None: ...
    def started(self, p: Placement, rec: Any) -> None: ...
    def update(self, *what: Any) -> None: ...


def launch(p: Placement, opts: LaunchOptions, screen: Screen) -> Launched:
    pre = None
    if opts.preflight:
        pre = p.preflight()
        if pre is not None:
            screen.preflight(pre)
            if p.refuses(pre):
                return Launched("refused", preflight=pre, name=p.name)
    since = records.now()
    rec = None
    try:  # from here on, Ctrl-C at any moment ends in `interrupted`
        rec = p.start(pre, probe=opts.probe, replace=opts.replace)
        screen.started(p, rec)
        if not opts.watch:
            p.release(rec)
            return Launched("started", preflight=pre, record=rec, name=p.name)
    except KeyboardInterrupt:
        return interrupted(p, detach=opts.detach, since=since, pre=pre)
    except Exception as e:
        raise unwatched(p, e, keep=opts.keep, detach=opts.detach, since=since, rec=rec)
    return watch(p, rec, timeout=opts.timeout or p.ready_timeout, keep=opts.keep, detach=opts.detach,
                 on_update=screen.update, pre=pre)


def watch(p: Placement, rec: Any, *, timeout: Optional[float], keep: bool, detach: bool,
          on_update: Callable | None = None, pre: Optional[dict[str, Any]] = None) -> Launched:
    """Watch to the verdict; on Ctrl-C stop the run and confirm it is gone, unless `detach`."""
    try:
        p.watching(rec, keep=keep, detach=detach)
        o = p.watch(rec, timeout=timeout, keep=keep, on_update=on_update)
    except KeyboardInterrupt:
        return interrupted(p, detach=detach, rec=rec, pre=pre)
    except Exception as e:
        raise unwatched(p, e, keep=keep, detach=detach, rec=rec)
    p.release(rec)  # the watch stopped what it had to (dead, crashed); the rest stays on purpose
    return Launched("watched", preflight=pre, record=rec, outcome=o, stopped=bool(getattr(o, "stopped", False)),
                    name=p.name)


def interrupted(p: Placement, *, detach: bool, since: float = 0.0, rec: Any = None,
                pre: Optional[dict[str, Any]] = None) -> Launched:
    """Ctrl-C at any moment of a launch or watch (the one policy): the run this launch started is
    stopped and confirmed gone, or left running as asked (`detach`), or, when that cannot be done
    (a second Ctrl-C, the host unreachable, a start still unresolved), the result says why it may
    still run, so its name and the stop command get printed."""
    from dynspec_cli.run.control import RunError
    from dynspec_cli.transport import TransportError

    try:
        rec = rec or p.started(since)
        if rec is None:
            return Launched("interrupted", preflight=pre, record=None, stopped=True, name=p.name)
        why = p.unresolved(rec)
        if why:
            return Launched("interrupted", preflight=pre, record=rec, name=p.name, left=why)
        if detach:
            p.release(rec)
            return Launched("interrupted", preflight=pre, record=rec, detached=True, name=p.name)
        left = p.stop(rec)
        return Launched("interrupted", preflight=pre, record=rec, stopped=not left, name=p.name, left=left or None)
    except KeyboardInterrupt:
        why = "interrupted again while it was being stopped"
    except (RunError, TransportError) as e:
        why = f"it could not be stopped: {e}"
    return Launched("interrupted", preflight=pre, record=rec, name=p.name, left=why)


FATE = "dynspec_run_fate"  # the attribute of an exception that says what became of the run (cli/main.py prints it)


def unwatched(p: Placement, error: Exception, *, keep: bool, detach: bool, since: float = 0.0,
              rec: Any = None) -> Exception:
    """Anything that goes wrong inside dynspec while it answers for a run it started (a bug in the
    judge, a missing table, a lost host) ends as Ctrl-C does: the run is stopped and confirmed
    gone, or, with --keep/--detach, left running with its record marked and the command that stops
    it said. Nothing dynspec started runs on unwatched and unsaid. Returns `error`, carrying the
    sentence (attribute FATE), for the caller to raise."""
    from dynspec_cli.run.control import RunError
    from dynspec_cli.transport import TransportError

    why = f"dynspec stopped watching it: {type(error).__name__}: {error}"
    name = p.name
    try:
        rec = rec or p.started(since)
        if rec is None:  # nothing was started: the error alone is the whole story (bad input stays one line)
            return error
        if (cut := p.unresolved(rec)):
            if isinstance(error, (RunError, TransportError)):
                # the start refused or failed before it knew a process (sbatch rejected the job, the port
                # is taken): its one line says why, and unresolved() has cancelled what it may have submitted
                return error
            fate = f"run {name} may still be running ({cut}); stop it with: {p.hint('stop', rec)}"
        elif keep or detach:
            p.mark(rec, why)
            p.release(rec)
            fate = (f"run {name} keeps running, unwatched (--{'keep' if keep else 'detach'}); "
                    f"stop it with: {p.hint('stop', rec)}")
        else:
            left = p.stop(rec)
            fate = (f"stopped {name}; no process of it remains" if not left else
                    f"run {name} may still be running ({left}); stop it with: {p.hint('stop', rec)}")
    except KeyboardInterrupt:
        if rec is None:
            return error
        fate = f"run {name} may still be running (interrupted while it was being stopped); stop it with: {p.hint('stop', rec)}"
    except (RunError, TransportError, OSError) as e:
        if rec is None:  # the host cannot even say whether this launch started anything: the error says why
            return error
        fate = f"run {name} may still be running (it could not be stopped: {e}); stop it with: {p.hint('stop', rec)}"
    setattr(error, FATE, fate)
    return error

"""Process layout as in sglang's Engine._launch_subprocesses: the scheduler of every TP rank and the
detokenizer run in processes started with multiprocessing "spawn"."""
import multiprocessing
import multiprocessing as mp
import os

from sglang_standin.srt.managers.detokenizer_manager import run_detokenizer_process
from sglang_standin.srt.managers.scheduler import run_scheduler_process


class PortArgs:
    def __init__(self):
        self.scheduler_input_ipc_name = "ipc:///tmp/standin"


def _set_envs_and_config(server_args):
    os.environ["STANDIN_RUN"] = "1"
    mp.set_start_method("spawn", force=True)


def _launch_subprocesses(server_args):
    _set_envs_and_config(server_args)
    port_args = PortArgs()
    ctx = multiprocessing.get_context("spawn")
    procs, readers, keepalive = [], [], []
    for tp_rank in range(server_args.tp_size):
        reader, writer = ctx.Pipe(duplex=False)
        hold_r, hold_w = ctx.Pipe(duplex=False)  # EOF on hold_r tells a serve-forever scheduler to stop
        gpu_id, moe_ep_rank, pp_rank = tp_rank, 0, 0
        proc = ctx.Process(
            target=run_scheduler_process,
            args=(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, None, writer, hold_r),
        )
        proc.start()
        writer.close()
        hold_r.close()
        procs.append(proc)
        readers.append(reader)
        keepalive.append(hold_w)
    detoken = mp.Process(target=run_detokenizer_process, args=(server_args, port_args))
    detoken.start()
    results = [r.recv() for r in readers]
    detoken.join()
    if not server_args.serve_forever:
        for w in keepalive:
            w.close()
        for p in procs:
            p.join()
    else:
        _launch_subprocesses.keepalive = keepalive
    return [r["status"] for r in results]

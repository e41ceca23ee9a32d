import sys

from sglang_standin.srt.managers.tp_worker import TpModelWorker
from sglang_standin.srt.speculative.spec_info import create_worker


class Batch:
    def __init__(self, batch_size):
        self.batch_size = batch_size


class Scheduler:
    def __init__(self, server_args, gpu_id, tp_rank):
        self.server_args = server_args
        self.tp_worker = TpModelWorker(server_args, gpu_id, tp_rank)
        self.draft_worker = None
        if server_args.speculative_algorithm:
            worker_cls = create_worker(server_args)  # function-local import of the chosen module, as 0.5.8+
            self.draft_worker = worker_cls(server_args, gpu_id, tp_rank, self.tp_worker)

    def event_loop(self):
        worker = self.draft_worker or self.tp_worker
        sizes = self.server_args.batch_sizes
        out = []
        for step in range(self.server_args.steps):
            out.append(worker.forward_batch_generation(Batch(sizes[step % len(sizes)])))
        return out


def run_scheduler_process(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank, pipe_writer,
                          hold=None):
    from sglang_standin.srt.plugins import load_plugins

    load_plugins()  # first, as sglang's run_scheduler_process (0.5.11+)
    scheduler = Scheduler(server_args, gpu_id, tp_rank)
    out = scheduler.event_loop()
    pipe_writer.send({"status": "ready-%d" % tp_rank, "steps": len(out)})
    if server_args.serve_forever and hold is not None:
        try:
            hold.recv()
        except EOFError:
            pass
    sys.stdout.flush()

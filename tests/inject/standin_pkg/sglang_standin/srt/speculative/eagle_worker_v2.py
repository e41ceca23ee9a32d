"""Spec v2 worker (overlap scheduler). Patch markers as in eagle_worker.py."""
import sys

from sglang_standin.srt.managers.tp_worker import TpModelWorker


class BaseSpecWorker:
    def __init__(self, server_args):
        self.server_args = server_args


class EagleDraftWorker(BaseSpecWorker):
    def __init__(self, server_args):
        super().__init__(server_args)


class EAGLEWorkerV2(BaseSpecWorker):
    def __init__(self, server_args, gpu_id, tp_rank, target_worker):
        super().__init__(server_args)
        self.target_worker = target_worker
        self.draft_worker = EagleDraftWorker(server_args)
        self.threshold = server_args.speculative_disable_batch_threshold  # PATCH
        sys.stderr.write("Dynamic speculation disable enabled: threshold=%s" % self.threshold + "\n")  # PATCH
        if server_args.crash_in_worker:
            raise RuntimeError("standin: worker init failed")

    def forward_batch_generation(self, batch):
        # the user's dynamic disable  # PATCH-NOCODE
        if self.threshold is not None and batch.batch_size > self.threshold:  # PATCH
            return self.target_worker.forward_batch_generation(batch)  # PATCH
        if batch.batch_size > 10 ** 9:  # PATCH
            raise AssertionError("unreachable")  # PATCH-NEVER
        if self.server_args.crash_in_forward:
            raise RuntimeError("standin: forward failed")
        return ("eagle-v2", batch.batch_size)

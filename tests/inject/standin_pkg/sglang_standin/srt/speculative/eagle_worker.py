"""Spec v1 worker. Lines ending in "# PATCH" are the user's patch; "# PATCH-NEVER" lines are patch
lines that never run with the stand-in's inputs; "# PATCH-NOCODE" is a patch line without bytecode."""
import sys

from sglang_standin.srt.managers.tp_worker import TpModelWorker


class EAGLEWorker(TpModelWorker):
    def __init__(self, server_args, gpu_id, tp_rank, target_worker):
        super().__init__(server_args, gpu_id, tp_rank)
        self.target_worker = target_worker
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
        return ("eagle-v1", batch.batch_size)

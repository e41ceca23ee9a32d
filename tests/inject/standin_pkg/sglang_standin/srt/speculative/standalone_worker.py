from sglang_standin.srt.speculative.eagle_worker import EAGLEWorker


class StandaloneWorker(EAGLEWorker):
    def __init__(self, server_args, gpu_id, tp_rank, target_worker):
        super().__init__(server_args, gpu_id, tp_rank, target_worker)

class TpModelWorker:
    def __init__(self, server_args, gpu_id, tp_rank):
        self.server_args = server_args
        self.gpu_id = gpu_id
        self.tp_rank = tp_rank

    def forward_batch_generation(self, batch):
        return ("target", batch.batch_size)

def create_worker(server_args):
    if server_args.speculative_algorithm == "STANDALONE":
        from sglang_standin.srt.speculative.standalone_worker import StandaloneWorker

        return StandaloneWorker
    if server_args.disable_overlap_schedule:
        from sglang_standin.srt.speculative.eagle_worker import EAGLEWorker

        return EAGLEWorker
    from sglang_standin.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    return EAGLEWorkerV2

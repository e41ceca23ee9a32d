import argparse
import dataclasses
import sys
from typing import List, Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str = "standin-model"
    device: str = "cpu"
    tp_size: int = 1
    dp_size: int = 1
    speculative_algorithm: Optional[str] = None
    speculative_eagle_topk: int = 1
    speculative_num_steps: int = 3
    speculative_num_draft_tokens: int = 4
    # the user's patch: a new flag
    speculative_disable_batch_threshold: Optional[int] = None
    disable_overlap_schedule: bool = False
    # stand-in controls (not sglang's)
    steps: int = 5
    batch_sizes: List[int] = dataclasses.field(default_factory=lambda: [1, 8])
    exit_code: int = 0
    serve_forever: bool = False
    crash_in_worker: bool = False
    crash_in_forward: bool = False
    sigterm_handler: bool = False

    def __post_init__(self):
        if self.speculative_algorithm in ("EAGLE", "EAGLE3") and self.speculative_eagle_topk > 1:
            # like sglang 0.5.11+: spec v2 only supports topk = 1
            sys.stderr.write("Spec v1 is used for eagle/eagle3 because spec v2 currently only supports topk = 1." + "\n")
            self.disable_overlap_schedule = True


def prepare_server_args(argv) -> ServerArgs:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", default="standin-model")
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--speculative-algorithm", default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=1)
    p.add_argument("--speculative-disable-batch-threshold", type=int, default=None)
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-sizes", default="1,8")
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--serve-forever", action="store_true")
    p.add_argument("--crash-in-worker", action="store_true")
    p.add_argument("--crash-in-forward", action="store_true")
    p.add_argument("--sigterm-handler", action="store_true")
    a = p.parse_args(argv)
    return ServerArgs(
        model_path=a.model_path, tp_size=a.tp_size, speculative_algorithm=a.speculative_algorithm,
        speculative_eagle_topk=a.speculative_eagle_topk,
        speculative_disable_batch_threshold=a.speculative_disable_batch_threshold,
        disable_overlap_schedule=a.disable_overlap_schedule, steps=a.steps,
        batch_sizes=[int(x) for x in a.batch_sizes.split(",")], exit_code=a.exit_code,
        serve_forever=a.serve_forever, crash_in_worker=a.crash_in_worker,
        crash_in_forward=a.crash_in_forward, sigterm_handler=a.sigterm_handler,
    )

"""The pinned-controller case of issue 20, on the real server: a patched verify path that no longer feeds
sglang's adaptive controller. EAGLEWorkerV2.on_verify_complete_cpu (sglang 0.5.12.post1) skips the
controller's on_verify_complete while DYNSPEC_GPU_STARVE_ADAPTIVE is set in the server's environment,
so the draft steps stay where they started however well the drafts are accepted. Stdlib only.

    python starve_adaptive.py SITE_DIR
"""
import sys
from pathlib import Path

CALL = "            self.adaptive_controller.on_verify_complete(num_correct_drafts_per_req)\n"
GATED = ("            if not __import__('os').environ.get('DYNSPEC_GPU_STARVE_ADAPTIVE'):\n"
         "                self.adaptive_controller.on_verify_complete(num_correct_drafts_per_req)\n")


def main() -> int:
    path = Path(sys.argv[1]) / "sglang" / "srt" / "speculative" / "eagle_worker_v2.py"
    text = path.read_text(encoding="utf-8")
    if GATED in text:
        print(f"{path}: already gated")
        return 0
    if text.count(CALL) != 1:
        print(f"{path}: the on_verify_complete call is not there once ({text.count(CALL)} times)")
        return 1
    path.write_text(text.replace(CALL, GATED), encoding="utf-8")
    print(f"{path}: on_verify_complete gated on DYNSPEC_GPU_STARVE_ADAPTIVE")
    return 0


if __name__ == "__main__":
    sys.exit(main())

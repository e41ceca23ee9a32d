"""python -m sglang_standin.launch_server [options]: like `python -m sglang.launch_server`.

Each spawned child re-imports this module as __mp_main__ (module-level code runs, the main block not),
as happens with the real launcher."""
import sys

from sglang_standin.srt.server_args import prepare_server_args


def run_server(server_args):
    from sglang_standin.srt.entrypoints.http_server import launch_server

    return launch_server(server_args)


if __name__ == "__main__":
    server_args = prepare_server_args(sys.argv[1:])
    sys.exit(run_server(server_args))

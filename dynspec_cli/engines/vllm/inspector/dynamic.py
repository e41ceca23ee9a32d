"""vLLM's own argument and config resolution (what `vllm serve` runs before any model loads): the
one module of this inspector that imports vllm (and torch), only when the input asks for it."""
import sys


def resolve(flags):
    """EngineArgs from vLLM's CLI parser, then create_engine_config(). On a host without a GPU vLLM
    needs VLLM_TARGET_DEVICE=cpu to pick a platform. Everything it prints goes to stderr."""
    import logging
    import time

    t0 = time.time()
    records = []

    class _Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                records.append(record.getMessage()[:500])

    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    handler = _Keep()
    try:
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # older releases
            from vllm.utils import FlexibleArgumentParser
        from vllm.engine.arg_utils import EngineArgs

        # after the import: vllm configures its loggers (dictConfig) when imported
        logging.getLogger("vllm").addHandler(handler)
        flags = list(flags)
        if flags and not flags[0].startswith("-"):  # `vllm serve MODEL ...`
            flags = ["--model"] + flags

        parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
        ns = parser.parse_args(flags)
        cfg = EngineArgs.from_cli_args(ns).create_engine_config()
        spec = cfg.speculative_config
        unsupported = None
        getter = getattr(cfg, "_get_v2_model_runner_unsupported_features", None)
        if getter is not None:
            unsupported = list(getter())
        v2 = getattr(cfg, "use_v2_model_runner", None)
        return {"ok": True, "seconds": round(time.time() - t0, 2), "use_v2_model_runner": v2,
                "unsupported_v2": unsupported, "method": getattr(spec, "method", None) if spec else None,
                "num_spec_tokens": getattr(spec, "num_speculative_tokens", None) if spec else None,
                "data_parallel_size": cfg.parallel_config.data_parallel_size, "warnings": records}
    except BaseException as e:  # SystemExit from argparse included: the caller gets JSON
        return {"ok": False, "seconds": round(time.time() - t0, 2), "warnings": records,
                "error": {"type": type(e).__name__, "message": str(e)[:2000]}}
    finally:
        logging.getLogger("vllm").removeHandler(handler)
        sys.stdout = real_stdout

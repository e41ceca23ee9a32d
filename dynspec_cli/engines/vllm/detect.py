"""vLLM's line shape (vllm/logger.py): an optional process tag, then `LEVEL mm-dd hh:mm:ss
[file.py:N] `. Read by its rules (rules.normalize) and by `--engine auto` (the engine's Detection)."""

PROC = r"^\((?P<proc>[A-Za-z][\w]*?)(?:_(?P<role>DP|TP|PP|EP)(?P<rank>\d+))?(?: rank=(?P<wrank>\d+))? pid=(?P<pid>\d+)(?:, ip=[\d.:a-fA-F]+)?\) ?"
PREFIX = r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[?(?P<src>[\w./<>-]+):(?P<lineno>\d+)\] ?"

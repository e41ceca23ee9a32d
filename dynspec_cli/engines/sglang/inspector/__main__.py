"""`python -m dynspec_cli.engines.sglang.inspector < input.json`: the folder run in place (debugging)."""
from .main import run

run()

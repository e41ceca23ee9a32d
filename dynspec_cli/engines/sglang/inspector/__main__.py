"""`python -m dynspec_cli.inject.inspector < input.json`: the folder run in place (debugging)."""
from .main import run

run()

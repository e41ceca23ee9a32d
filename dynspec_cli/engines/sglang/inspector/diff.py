"""The user's unified diff, mapped onto the installed sglang: is each hunk applied, and in which scope.

The analysis is every engine's (the inspectors' shared module, dynspec_cli/inject/inspector_common.py);
this module names the package it maps diff paths onto."""
from .common import shared

mark_roles = shared.mark_roles


def analyse_diff(text, pkg_dir):
    return shared.analyse_diff(text, pkg_dir, "sglang")

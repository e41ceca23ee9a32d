"""The user's unified diff, mapped onto the installed sglang: is each hunk applied, and in which scope.

The analysis is every engine's (the inspectors' shared module, dynspec_cli/inject/inspector_common.py);
this module names the package it maps diff paths onto, so sglang's callers keep their names."""
from .common import shared

parse_diff = shared.parse_diff
mark_roles = shared.mark_roles
_find_block = shared._find_block
_first_mismatch = shared._first_mismatch
_statement_spans = shared._statement_spans
_ranges = shared._ranges

PACKAGE = "sglang"


def map_diff_path(path, pkg_dir):
    """Installed file for a diff path such as a/python/sglang/srt/x.py, sglang/srt/x.py or srt/x.py."""
    return shared.map_diff_path(path, pkg_dir, PACKAGE)


def analyse_diff(text, pkg_dir):
    return shared.analyse_diff(text, pkg_dir, PACKAGE)

"""The machine-readable report: one JSON object per verdict."""
from __future__ import annotations

import json
import sys
from typing import Any


def emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    sys.stdout.flush()

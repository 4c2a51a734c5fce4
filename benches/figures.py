"""How a bench prints its figures: one JSON object (``--json``), or one per line, aligned."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def print_figures(result: Mapping[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    width = max(map(len, result), default=0)
    for key, value in result.items():
        print(f"{key:>{width}}  {value}")

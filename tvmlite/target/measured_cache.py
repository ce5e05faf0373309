"""The on-disk cache of what was measured on a machine (the FMA peak, the bandwidths):
one JSON object per file, keyed by ``Target.key()``, so a measurement taken once serves
every later tuning summary and ``tvmlite explain`` on the same target."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["load_entries", "store_entry"]


def load_entries(path: Path) -> dict:
    """Every entry in ``path``; an unreadable or foreign file reads as empty."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def store_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Replace the entry under ``key``: write a temp file and rename it, so a reader
    never sees half a file and two writers lose at most one entry."""
    data = load_entries(path)
    data[key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

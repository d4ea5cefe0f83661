"""The machine-wide cache folder: results computed from installed packages alone (MiniLM vectors of
texts, the JVM's class cache), kept between runs so a second run skips that work and writes the same
bytes."""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder() -> Path:
    """$MEDSNIP_CACHE, else $XDG_CACHE_HOME/medsnip, else ~/.cache/medsnip."""
    if os.environ.get("MEDSNIP_CACHE"):
        return Path(os.environ["MEDSNIP_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medsnip"

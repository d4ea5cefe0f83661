"""Entry points of tools whose issues have not landed yet: they say so instead of pretending."""

from __future__ import annotations

import sys


def not_built_yet(tool: str, what: str) -> None:
    print(f"{tool}: not built yet ({what}). Today medsnip builds corpora: see `corpusbuild --help`.", file=sys.stderr)
    sys.exit(2)

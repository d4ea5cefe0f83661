"""What a served root asks searchd to serve by default: ROOT/serve.json, written by `medsnip build` from
a recipe's [serve] table and read by searchd when it loads the root.

    {"retrievers": ["bm25", "dense-medcpt", ...], "fusion": "medrag", "rrf_k": 100}

A request that names no retrievers gets `retrievers` (every retriever the root has when the file has
none), one that names no fusion method gets `fusion`, one with rrf_k 0 gets `rrf_k`. Without the file:
every retriever, RRF, k = 60.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

SERVE_FILE = "serve.json"
FUSIONS = ("rrf", "medrag")
DEFAULT_RRF_K = 60


class ServePlanError(ValueError):
    """A serve.json or [serve] table that does not say what to serve in a way searchd understands."""


@dataclass(frozen=True)
class ServePlan:
    retrievers: list[str] = field(default_factory=list)  # empty: every retriever the root has
    fusion: str = "rrf"
    rrf_k: int = DEFAULT_RRF_K

    @classmethod
    def from_dict(cls, values: dict, where: str) -> ServePlan:
        unknown = set(values) - {"retrievers", "fusion", "rrf_k"}
        if unknown:
            raise ServePlanError(f"{where}: unknown key(s) {sorted(unknown)} (retrievers, fusion, rrf_k)")
        retrievers = values.get("retrievers", [])
        if not isinstance(retrievers, list) or not all(isinstance(name, str) and name for name in retrievers):
            raise ServePlanError(f"{where}: retrievers must be a list of names (bm25, dense-<name>)")
        fusion = values.get("fusion", "rrf")
        if fusion not in FUSIONS:
            raise ServePlanError(f"{where}: fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        rrf_k = values.get("rrf_k", DEFAULT_RRF_K)
        if not isinstance(rrf_k, int) or isinstance(rrf_k, bool) or rrf_k < 1:
            raise ServePlanError(f"{where}: rrf_k must be a positive integer, got {rrf_k!r}")
        return cls(list(retrievers), fusion, rrf_k)

    @classmethod
    def read(cls, root: Path) -> ServePlan:
        path = Path(root) / SERVE_FILE
        if not path.is_file():
            return cls()
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ServePlanError(f"{path}: not readable JSON ({error})") from error
        if not isinstance(values, dict):
            raise ServePlanError(f"{path}: must hold a JSON object")
        return cls.from_dict(values, str(path))

    def write(self, root: Path) -> None:
        path = Path(root) / SERVE_FILE
        temp = path.with_name(f".{SERVE_FILE}.tmp-{os.getpid()}")
        temp.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        os.replace(temp, path)

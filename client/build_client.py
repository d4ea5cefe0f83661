"""Build `medsnip-client`, the distribution a runner's own environment installs (MedRAG's, FlashRAG's, Search-R1's,
each with its own pins): searchd's gRPC client (searchd.client), the runner adapters (searchd.runners: MedRAG's
RetrievalSystem and DocExtracter, MIRAGE's loop, LangChain, LlamaIndex) and the generated protocol (medsnip.v1),
with grpcio and protobuf as its only requirements (langchain-core or llama-index-core with the extras of the
same names). The modules are this repository's own files, copied as they are into a staging folder beside the
package metadata, then built into a wheel:

    python client/build_client.py [--out dist]        # or: make client
    pip install dist/medsnip_client-0.1.0-py3-none-any.whl

It holds the `medsnip` and `searchd` packages' client side only: install it where medsnip itself is not.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = [
    "medsnip/__init__.py",
    "medsnip/v1/__init__.py",
    "medsnip/v1/search_pb2.py",
    "medsnip/v1/search_pb2.pyi",
    "medsnip/v1/search_pb2_grpc.py",
    "searchd/__init__.py",
    "searchd/client.py",
    "searchd/runners/__init__.py",
    "searchd/runners/hits.py",
    "searchd/runners/medrag.py",
    "searchd/runners/mirage.py",
    "searchd/runners/langchain.py",
    "searchd/runners/llamaindex.py",
]
PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "medsnip-client"
version = "{version}"
description = "searchd's client and runner adapters (MedRAG, MIRAGE, LangChain, LlamaIndex), without the indexers"
requires-python = ">=3.9"
dependencies = [{dependencies}]

[project.optional-dependencies]
langchain = ["langchain-core>=0.2"]
llamaindex = ["llama-index-core>=0.10"]

[tool.setuptools]
packages = ["medsnip", "medsnip.v1", "searchd", "searchd.runners"]

[tool.setuptools.package-data]
"medsnip.v1" = ["*.pyi"]
"""


def client_requirements() -> list[str]:
    """grpcio and protobuf at least as new as the generated code requires (it checks both at import): protobuf as
    medsnip's pyproject pins it, grpcio from the version the stubs were generated with."""
    import re
    import tomllib

    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    protobuf = [d.split(";")[0].strip() for d in dependencies if d.startswith("protobuf")]
    stubs = (REPO / "medsnip" / "v1" / "search_pb2_grpc.py").read_text()
    grpc_version = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", stubs).group(1)
    return [f"grpcio>={grpc_version}", *protobuf]


def build(out: Path) -> Path:
    from medsnip import __version__

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as staging:
        stage = Path(staging)
        for name in FILES:
            target = stage / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target)
        dependencies = ", ".join(f'"{d}"' for d in client_requirements())
        (stage / "pyproject.toml").write_text(PYPROJECT.format(version=__version__, dependencies=dependencies))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(out),
                str(stage),
            ],
            check=True,
        )
    wheel = out / f"medsnip_client-{__version__}-py3-none-any.whl"
    if not wheel.is_file():
        raise SystemExit(f"no {wheel} after pip wheel")
    return wheel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    print(build(parser.parse_args().out))


if __name__ == "__main__":
    main()

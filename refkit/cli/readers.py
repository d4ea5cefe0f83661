"""`refkit reader-folder`: a local model file as a folder a reader serves."""

from __future__ import annotations

from pathlib import Path

import click

from refkit.cli.common import (
    PathIn,
    console,
    friendly_errors,
    main,
)


@main.command("reader-folder")
@click.argument("gguf", type=PathIn)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The new model folder.")
@friendly_errors
def reader_folder(gguf: Path, out: Path) -> None:
    """Turn a .gguf model into a transformers folder (float32 weights, tokenizer), for a server that loads
    folders only: `transformers serve` (the causal-lm reader reads the .gguf itself)."""
    from refkit.readers.causal_lm import gguf_to_folder

    gguf_to_folder(gguf, out)
    console.print(f"{gguf} -> {out} (serve it from its parent folder: transformers serve {out.name})")

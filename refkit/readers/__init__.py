"""Readers: the user's own model, asked where refkit noise's rules cannot read.

A reader is an OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp's server, `transformers serve`, a
hosted API), a causal LM run in process from a local folder or GGUF file, or a cross-encoder on disk
(READER_KINDS in refkit/readers/reader.py: a new kind is one module here and one row there). Every prompt
is a versioned template (refkit/readers/templates/), every answer is parsed strictly and kept in a cache
file, so `--replay CACHE` rebuilds a run byte for byte with no reader at all.
"""

from refkit.readers.cache import CacheError, ReaderCache
from refkit.readers.errors import ReaderError
from refkit.readers.prompts import TASKS, load_templates
from refkit.readers.reader import READER_KINDS, Reader, open_reader

__all__ = [
    "READER_KINDS",
    "TASKS",
    "CacheError",
    "Reader",
    "ReaderCache",
    "ReaderError",
    "load_templates",
    "open_reader",
]

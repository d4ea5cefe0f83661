"""corpusbuild: raw biomedical sources to sharded, reproducible ~1000-character snippets."""

"""The stage before corpusbuild: a recipe's inputs fetched from their publishers (NLM, Wikimedia, a release),
verified against the publishers' checksums, resumable, and pinned in a lock file (`medsnip fetch`)."""

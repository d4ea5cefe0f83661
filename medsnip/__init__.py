"""medsnip: the ground floor every stage stands on: the snippet and build-record contracts, corpus
versions and their lineage, generations and leases, executors, job locks, process hygiene, query
files, and the text encoders indexer, searchd and refkit share (medsnip.encoders)."""

__version__ = "0.1.0"

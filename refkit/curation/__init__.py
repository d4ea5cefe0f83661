"""Curation from collected references to a scored benchmark: collect, deduplicate, label, assemble CRAB-style items,
score answers, audit a noise run, and review it with experts."""

"""`make demo`: the main job on the bundled real samples (build, index, serve, query, refkit). A
repository-level package: no stage imports it."""

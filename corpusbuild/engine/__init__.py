"""The build engine every source runs through: map (one input, or a byte range of one, through its
reader into parts: maptask, parts), reduce (one shard merged across inputs, latest version wins:
reducetask), publish (build.json, the change set against the previous build and the commit: publish,
changes), orchestrated by shardbuild on an executor; then verify, report and export."""

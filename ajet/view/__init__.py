"""`ajet view`: the read-only web viewer of run folders (a FastAPI app over the run's JSONL files,
and a static page in static/ with uPlot vendored for the curves, so it works offline)."""

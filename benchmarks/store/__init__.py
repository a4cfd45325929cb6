"""The storage benchmarks: the dialog stores, recall's search, engine candidates, memory."""

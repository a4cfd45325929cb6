"""The core: the context pipeline's line-neutral parts (entries, truncation, token counting,
calibration, the ladder and its accountant, compaction, extractive summaries, the eviction
index, the configuration and the errors). It imports no AgentScope and nothing above it
(`docs/contributors/architecture.md`)."""

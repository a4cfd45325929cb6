"""The model rung: compaction, the Compactor and its prompts, the prefix request."""

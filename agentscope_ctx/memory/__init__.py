"""Long-term memory: `MEMORY.md` and the daily notes, consolidation, and the Summarizer that
writes them."""

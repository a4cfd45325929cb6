"""Recall: what brings moved-out content back to the agent (`search_history` over the stores'
search index, `read_file` on saved outputs and files)."""

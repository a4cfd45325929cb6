"""Search text: chunks, tokens, queries, hits; saved outputs indexed in pieces."""

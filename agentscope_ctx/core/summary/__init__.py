"""A summary's parts as data and text: carried block, kept, extractive, eviction, outcome."""

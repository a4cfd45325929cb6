"""Storage seams (DESIGN.md §11): the dialog store, the output store, the search index."""

"""The stores: what the package keeps (the dialog store, the saved tool outputs with their
line index, the search database, the usage file), behind the three storage seams of DESIGN §11
(`seams`: the dialog store, the output store, the search index): files + SQLite under
`working_dir` by default (`local`), PostgreSQL for a fleet (`postgres`), chosen by config
(`factory.open_stores`). They import only the core (`docs/contributors/architecture.md`)."""

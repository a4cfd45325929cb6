"""The stores: what the package keeps under `working_dir` (the dialog store, the saved tool
outputs with their line index, the search database, the usage file). They import only the
core (`docs/architecture.md`)."""

"""The start-up benchmark: importing the package and the quick CLI commands."""

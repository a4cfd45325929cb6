"""The package's version, in one place: `agentscope_ctx.__version__`, the wheel's metadata
(pyproject's ``[tool.setuptools.dynamic]`` reads this file without importing the package) and
``agentscope-ctx --version``. CHANGELOG.md names what each version holds."""

__version__ = "0.1.0"

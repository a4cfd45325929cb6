"""AgentScope 2.x's own test suite with a `ContextManager` attached to every `Agent` it builds
(`plugin.py`), and the command that runs it with and without (`run.py`). See
`docs/contributors/agentscope2.md` §10."""

"""The cost benchmarks: what holding the budget costs with a prompt cache, per AgentScope line."""

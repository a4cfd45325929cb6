"""The agent's model as both adapters watch it: `GuardedModel` (prompt sizes the provider
reports, one retry after a context-length error). Uses only AgentScope API both lines share."""

"""The AgentScope 1.x adapter: hooks on a `ReActAgent` (`ContextManager`), the `Toolkit`
middleware, `AtomicJSONSession`, the 1.x model runner. Imported only by the edge."""

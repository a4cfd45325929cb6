"""The context held: ContextMemory, its backend and views, pins, turns, unanswered calls."""

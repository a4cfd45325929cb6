"""The services one agent's context runs on, line-neutral: the pipeline wired to its stores,
recall, long-term memory and the Summarizer. Each adapter (`agentscope1`, `agentscope2`)
drives one."""

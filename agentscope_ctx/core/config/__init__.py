"""The configuration: ContextConfig, its sections, the YAML reader, model config, DSN."""

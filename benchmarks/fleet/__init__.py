"""The fleet benchmarks: many sessions on worker processes sharing one PostgreSQL store."""

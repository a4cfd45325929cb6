"""The pipeline benchmarks: the core's step and its parts, the 2.x adapter's step, the probes."""

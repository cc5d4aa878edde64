"""dashbench: honest training-throughput benchmarks for CPUs, GPUs and TPUs."""

__version__ = "0.1.0"

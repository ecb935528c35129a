"""What the documentation and the layout promise: the README and pages, their transcripts, the notebook,
the benchmarks' quick run, the module structure (floors, circles, locks)."""

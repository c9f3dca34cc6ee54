"""Benchmark suites: each module's ``run(quick)`` returns records for ``results/<suite>.json``."""
SUITES = ("tile", "gemm", "rmsnorm", "mla", "mla_timeline")

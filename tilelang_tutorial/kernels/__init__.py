"""The tutorial's kernels: one kernel factory per module, its torch reference beside it."""

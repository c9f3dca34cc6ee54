"""A bug typed into 05_rmsnorm_silu.ipynb's kernel cells reaches every later check (see reader_flow.py)."""
from reader_flow import flow_test

test_a_bug_in_the_kernel_cell_reaches_every_later_check = flow_test("05_rmsnorm_silu.ipynb")

"""A bug typed into 05b_rmsnorm_in_depth.ipynb's kernel cells reaches every later check (see reader_flow.py)."""
from reader_flow import flow_test

test_a_bug_in_the_kernel_cell_reaches_every_later_check = flow_test("05b_rmsnorm_in_depth.ipynb")

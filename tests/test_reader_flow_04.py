"""A bug typed into 04_mla_decode.ipynb's kernel cells reaches every later check (see reader_flow.py)."""
from reader_flow import flow_test

test_a_bug_in_the_kernel_cell_reaches_every_later_check = flow_test("04_mla_decode.ipynb")

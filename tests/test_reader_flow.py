"""Every notebook has flow bugs (``lessons.FlowBug``) and a flow-test file that runs them."""
from reader_flow import BUGS, ROOT, flow_test_file


def test_every_notebook_has_a_flow_bug_and_a_flow_test_file():
    covered = {bug.notebook for _, bug in BUGS}
    notebooks = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    missing = [n for n in notebooks if n not in covered]
    assert not missing, f"no FlowBug (the lesson's flow_bugs()) for: {missing}"
    no_file = [n for n in notebooks if not flow_test_file(n).exists()]
    assert not no_file, f"no flow-test file for: {[str(flow_test_file(n).relative_to(ROOT)) for n in no_file]}"
    for n in notebooks:
        assert f'flow_test("{n}")' in flow_test_file(n).read_text(), f"{flow_test_file(n).name} does not run {n}"

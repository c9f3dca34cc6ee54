"""The one-call ``mla_decode``: validated once per state of its page table and lengths, and every
bad input still refused (in the emulator here; on a GPU the same code runs)."""
import pytest
import torch

from ... import runtime
from . import op, reference

# checks of numbers and of validation: without a GPU the emulator runs the program, no nvcc needed
pytestmark = pytest.mark.usefixtures("without_nvcc")


def _inputs():
    return reference.make_paged_inputs(2, 16, [65, 3], seed=0, device=runtime.mode().device)


@pytest.fixture
def validations(monkeypatch):
    calls = []
    real = op.validate_inputs
    monkeypatch.setattr(op, "validate_inputs", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(op, "_VALIDATED", {})
    return calls


def test_the_same_tensors_are_validated_once(validations):
    x = _inputs()
    first = op.mla_decode(**x)
    again = op.mla_decode(**x)
    assert len(validations) == 1
    torch.testing.assert_close(again, first)


@pytest.mark.parametrize("edit,message", [
    (lambda x: x["block_table"].__setitem__((1, 0), 999), "page ids"),
    (lambda x: x["block_table"].fill_(-1), "page ids"),
    (lambda x: x["cache_seqlens"].__setitem__(1, 0), ">= 1"),
    (lambda x: x["cache_seqlens"].__setitem__(0, 64 * 40), "too short"),
])
def test_a_table_changed_in_place_is_validated_again(validations, edit, message):
    x = _inputs()
    op.mla_decode(**x)
    edit(x)
    with pytest.raises(ValueError, match=message):
        op.mla_decode(**x)
    assert len(validations) == 2


def test_a_new_batch_with_the_same_table_is_refused_in_one_line(validations):
    x = _inputs()
    op.mla_decode(**x)
    x["q_nope"], x["q_pe"] = x["q_nope"][:1].contiguous(), x["q_pe"][:1].contiguous()
    with pytest.raises(ValueError, match="block_table has shape"):
        op.mla_decode(**x)


def test_inference_tensors_are_validated_every_call(validations):
    with torch.inference_mode():
        x = _inputs()
        op.mla_decode(**x)
        op.mla_decode(**x)
    assert len(validations) == 2

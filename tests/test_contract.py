"""The kernel-module contract and the suite's verdict on a kernel that is wrong."""

from types import SimpleNamespace

import pytest
import torch

import flash
from properties import (
    Case,
    check_gradients_match_oracle,
    check_lse_matches_oracle,
    check_output_matches_oracle,
    load_kernel,
)
from properties.kernels import NotApplicable
from tests.broken import wrong_scale

CASE = Case(65, 97, 24, (2, 3), "float32", is_causal=True)


def test_kernel_under_test_follows_contract(kernel):
    q, k, v = CASE.make_qkv("cuda" if torch.cuda.is_available() else "cpu")
    o = kernel.attention(q, k, v, True)
    assert o.shape == q.shape and o.dtype == q.dtype
    if hasattr(kernel, "attention_with_lse"):
        o2, lse = kernel.attention_with_lse(q, k, v, True)
        assert lse.shape == q.shape[:-1] and lse.dtype == torch.float32
        assert torch.equal(o, o2)


def test_wrong_scale_kernel_fails_with_a_clear_message():
    with pytest.raises(AssertionError) as info:
        check_output_matches_oracle(wrong_scale, CASE)
    message = str(info.value)
    for expected in ("check_output_matches_oracle", "tests.broken.wrong_scale", str(CASE),
                     "exceeds bound", "batch (", "row ", "col ", "reference error"):
        assert expected in message, message
    with pytest.raises(AssertionError, match="log-sum-exp"):
        check_lse_matches_oracle(wrong_scale, CASE)
    # The output of the call autograd recorded is checked first: a wrong forward is the cause,
    # wrong gradients its consequence.
    with pytest.raises(AssertionError, match=r"output o: check_gradients_match_oracle .* gradients recorded"):
        check_gradients_match_oracle(wrong_scale, CASE)


def test_module_without_lse_is_not_applicable():
    sdpa = load_kernel("oracle.adapters.sdpa")
    with pytest.raises(NotApplicable, match="has no attention_with_lse"):
        check_lse_matches_oracle(sdpa, CASE)


def test_load_kernel_rejects_a_module_without_attention():
    with pytest.raises(TypeError, match="has no callable attention"):
        load_kernel("tests.helpers")


def test_case_line_round_trips():
    case = Case(3, 5, 24, (2, 1), "float16", True, "strided", "uniform", 2.5, 11)
    assert Case.parse(str(case)) == case
    a, b = case.make_qkv("cpu"), Case.parse(str(case)).make_qkv("cpu")
    assert all(torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(a, b))


@pytest.mark.parametrize("block_q, block_k", [(16, 16), (16, 64), (32, 16), (64, 32), (128, 64)])
@pytest.mark.parametrize("case", [Case(97, 130, 24, (2,), "float32", True),
                                  Case(129, 65, 64, (1,), "float16", False)], ids=str)
def test_flash_tile_sizes(case, block_q, block_k):
    """The launcher's tile sizes are parameters; every one passes the oracle checks."""

    def attention_with_lse(q, k, v, is_causal=False):
        return flash.flash_attention_forward(q, k, v, is_causal, block_q=block_q, block_k=block_k)

    tiled = SimpleNamespace(__name__=f"flash with {block_q}x{block_k} tiles",
                            attention_with_lse=attention_with_lse,
                            attention=lambda *args: attention_with_lse(*args)[0])
    check_output_matches_oracle(tiled, case)
    check_lse_matches_oracle(tiled, case)

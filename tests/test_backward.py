"""The Triton backward (``flash``'s default) against the float64 oracle, its tiles, and its determinism.

These test ``flash`` itself, not ``--kernel``: the kernel under test gets the same gradient check in
``test_oracle_agreement.py``. Here: the backward's own grids (lengths around its tiles, every layout,
every head dim), a sweep of its tile sizes, bit-identical gradients on repeated calls, the Triton and
the dense backward agreeing within the error model, and (on a GPU) no ``n_q x n_k`` buffer.
"""

import types

import pytest
import torch

import flash
from flash.backward_triton import BackwardConfig
from oracle.dense import dense_attention
from properties import Case, VarlenCase, check_gradients_match_oracle
from properties import error_model as em
from properties._common import assert_gradients_match_oracle
from properties.grids import backward_cpu_cases, backward_gpu_cases
from tests.helpers import case_params

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("case", case_params(backward_cpu_cases()))
def test_gradients_match_oracle(case):
    check_gradients_match_oracle(flash, case)


@pytest.mark.parametrize("case", case_params(backward_gpu_cases(), gpu=True))
def test_gradients_match_oracle_gpu(case):
    check_gradients_match_oracle(flash, case)


class _TiledBackward(torch.autograd.Function):
    """The Triton forward and backward, with the backward's tiles given explicitly."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, config):
        o, lse = flash.flash_attention_forward(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal, ctx.config = is_causal, config
        return o

    @staticmethod
    def backward(ctx, do):
        grads = flash.flash_attention_backward(*ctx.saved_tensors, do, ctx.is_causal, config=ctx.config)
        return (*grads, None, None)


def tiled_kernel(config: BackwardConfig) -> types.ModuleType:
    """A kernel module whose backward uses ``config`` (named after it, for failure messages)."""
    module = types.ModuleType(
        f"flash[backward tiles dk/dv {config.block_q_dkdv}x{config.block_k_dkdv}, "
        f"dq {config.block_q_dq}x{config.block_k_dq}]"
    )
    module.attention = lambda q, k, v, is_causal=False: _TiledBackward.apply(q, k, v, is_causal, config)
    return module


TILES = [  # (block_q_dkdv, block_k_dkdv, block_q_dq, block_k_dq): square, skewed both ways, wide
    (16, 16, 16, 16), (16, 64, 64, 16), (64, 16, 16, 64), (32, 128, 128, 32), (128, 32, 32, 128),
]


@pytest.mark.parametrize("tiles", TILES, ids=lambda t: "x".join(map(str, t)))
@pytest.mark.parametrize("case", [Case(97, 130, 24, (2,), "float32", True, "seq_first"),
                                  Case(129, 65, 64, (1,), "float16", False, "strided"),
                                  Case(65, 63, 40, (1,), "float32", True)], ids=str)
def test_backward_tile_sizes(case, tiles):
    """Every tile shape of the backward, independent of the forward's, gives a correct gradient."""
    check_gradients_match_oracle(tiled_kernel(BackwardConfig(*tiles, 4, 1)), case)


def _grads(fn, case, dtype=None):
    q, k, v = case.make_qkv(DEVICE)
    do = case.make_grad_out(DEVICE)
    leaves = [t.detach().to(dtype or t.dtype).requires_grad_() for t in (q, k, v)]
    out = fn(*leaves)
    return torch.autograd.grad(out, leaves, do.to(out.dtype))


DETERMINISM_CASES = [Case(130, 97, 80, (2, 2), "float16", True, "heads_last", seed=6),
                     Case(65, 200, 32, (2,), "float32", False, "broadcast_kv", seed=6)]


@pytest.mark.parametrize("case", DETERMINISM_CASES, ids=str)
def test_gradients_are_bit_identical_across_calls(case):
    first = _grads(lambda *a: flash.attention(*a, case.is_causal), case)
    for _ in range(2):
        again = _grads(lambda *a: flash.attention(*a, case.is_causal), case)
        for name, a, b in zip(("dq", "dk", "dv"), first, again):
            assert torch.equal(a, b), f"{name} differs between two calls on {case}"


@pytest.mark.gpu
@pytest.mark.parametrize("case", case_params([
    Case(4097, 4095, 128, (2, 4), "bfloat16", True),
    Case(16384, 16384, 64, (1, 2), "bfloat16", False),
    Case(2049, 1023, 256, (1, 2), "float32", True),
    Case(1025, 3000, 96, (2, 3), "float16", False, "seq_first"),
]))
def test_gradients_are_bit_identical_across_calls_gpu(case):
    test_gradients_are_bit_identical_across_calls(case)


def assert_backwards_agree(case: Case) -> None:
    """The Triton and the dense backward agree within the error model.

    The dense backward (float32 throughout) takes the oracle's place; the bound is the error model's,
    ``factor x |same-dtype reference - dense| + floor``.
    """
    triton_grads = _grads(lambda *a: flash.attention(*a, case.is_causal), case)
    dense_grads = _grads(lambda *a: flash.attention(*a, case.is_causal, backward="dense"), case)
    ref_grads = _grads(lambda *a: dense_attention(*a, case.is_causal, compute_dtype=None)[0], case)
    oracle_grads = _grads(lambda *a: dense_attention(*a, case.is_causal)[0], case, torch.float64)
    q, k, v = case.make_qkv(DEVICE)
    magnitudes = em.gradient_magnitudes(q, k, v, case.make_grad_out(DEVICE), oracle_grads)
    scores = em.score_magnitude(q, k)
    terms = em.sum_lengths(q.shape[-2], k.shape[-2], em.group_of(q, k))
    for name, t, d, r, magnitude, n in zip(("dq", "dk", "dv"), triton_grads, dense_grads, ref_grads,
                                           magnitudes, terms):
        em.assert_within_error_model(
            em.Quantity(f"gradient {name} (Triton vs dense backward)", em.GRADIENT.factor), t, d, r,
            dtype=q.dtype, magnitude=magnitude, scores=scores, terms=n,
            context=f"flash backward='triton' vs 'dense' on {case}",
        )


@pytest.mark.parametrize("case", [Case(97, 129, 24, (2, 3), "float32", True, "offset", seed=8),
                                  Case(129, 33, 64, (2,), "float16", False, seed=8)], ids=str)
def test_triton_and_dense_backward_agree(case):
    assert_backwards_agree(case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", case_params([
    Case(n, n, d, (2, 2), dtype, causal)
    for n, d in ((1023, 64), (2049, 128), (1025, 256)) for dtype in ("bfloat16", "float16", "float32")
    for causal in (False, True)
]))
def test_triton_and_dense_backward_agree_gpu(case):
    assert_backwards_agree(case)


def test_gradient_of_a_broadcast_upstream_gradient():
    """``o.sum()`` sends back a ``do`` with every stride 0; the gradients must still be right (within
    the error model, against the oracle's for the same all-ones ``do``)."""
    case = Case(65, 33, 24, (2,), "float32", True)
    q, k, v = case.make_qkv(DEVICE)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    flash.attention(*leaves, True).sum().backward()
    do = torch.ones((), dtype=q.dtype, device=q.device).expand(q.shape)
    assert_gradients_match_oracle([t.grad for t in leaves], q, k, v, do, True,
                                  f"flash's gradients of o.sum() on {case}")


def test_lse_comes_back_detached():
    """flash documents its lse as not differentiable (gradients flow through ``o``): it must come
    back detached, so that a loss through it fails loudly instead of being given no gradient."""
    q, k, v = (t.requires_grad_() for t in Case(17, 33, 16, (2,)).make_qkv(DEVICE))
    packed = VarlenCase((5, 12), (9, 3), heads=2, head_dim=16).make_qkv(DEVICE)
    for t in packed[:3]:
        t.requires_grad_()
    for name, (o, lse) in (("attention_with_lse", flash.attention_with_lse(q, k, v, True)),
                           ("attention_varlen_with_lse", flash.attention_varlen_with_lse(*packed, True))):
        assert o.requires_grad, f"{name}: o has no gradient"
        assert not lse.requires_grad and lse.grad_fn is None, f"{name}: lse is differentiable"


def test_backward_choice_is_validated():
    q, k, v = Case(8, 8, 16, (1,)).make_qkv(DEVICE)
    with pytest.raises(ValueError, match="backward must be one of"):
        flash.attention(q, k, v, backward="cuda")
    with pytest.raises(ValueError, match="block_k_dq must be a power of two"):
        o, lse = flash.flash_attention_forward(q, k, v)
        flash.flash_attention_backward(q, k, v, o, lse, o, False, config=BackwardConfig(16, 16, 16, 24, 4, 1))


@pytest.mark.gpu
@pytest.mark.parametrize("is_causal", [False, True])
def test_backward_allocates_no_score_matrix(is_causal):
    """At n = 16384 an ``n x n`` float32 buffer is 1 GiB; the backward's peak stays near its outputs."""
    case = Case(16384, 16384, 64, (1,), "bfloat16", is_causal)
    q, k, v = (t.requires_grad_() for t in case.make_qkv("cuda"))
    do = case.make_grad_out("cuda")
    o = flash.attention(q, k, v, is_causal)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    torch.autograd.grad(o, (q, k, v), do)
    extra = torch.cuda.max_memory_allocated() - before
    # dq, dk, dv (3 x n x d in bf16, 6 MiB) and D (n floats); 64 MiB leaves room for the allocator.
    assert extra < 64 * 2**20, f"backward peak {extra / 2**20:.1f} MiB above its inputs at n = 16384"


@pytest.mark.parametrize("case", [Case(63, 65, 24, (2,), "float32", True, seed=0),
                                  Case(33, 47, 16, (2, 2), "float32", False, "seq_first", seed=5),
                                  Case(1, 1, 16, (), "float32", False, distribution="large", scale=2.0**40)],
                         ids=str)
def test_flash_gradients_finite_at_extreme_scores(case):
    """Beyond the contract (which promises no gradient at such scores, ``properties/kernels.py``):
    flash's backward keeps every ``P`` at most 1 where the float32 lse it recomputes ``P`` from has
    drifted below the row's top score (``flash.scores.lse_base2``), so at scaled scores of 1e10 and
    1e30 its ``dq, dk, dv`` are finite wherever the float64 oracle's are (here, everywhere).
    Without it, the top key's ``exp2`` overflowed from base-2 lse of about 2^30 (docs/findings.md,
    finding 20), as PyTorch's CPU SDPA still does."""
    _assert_gradients_finite_at_extreme_scores(case, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("case", case_params([
    Case(1023, 1025, 128, (1, 2), "bfloat16", True, seed=2),
    Case(257, 129, 64, (2, 2), "float32", False, "strided", seed=3),
], gpu=True))
def test_flash_gradients_finite_at_extreme_scores_gpu(case):
    """As :func:`test_flash_gradients_finite_at_extreme_scores`, compiled (the backward's product
    fused into ``s - lse``)."""
    _assert_gradients_finite_at_extreme_scores(case, "cuda")


def _assert_gradients_finite_at_extreme_scores(case: Case, device: str) -> None:
    from properties._common import gradients_with
    from properties.stability import EXTREME_SCORES, extreme_inputs

    for target in EXTREME_SCORES:
        q, k, v, how = extreme_inputs(case, target, device)
        context = f"flash on {case} with {how}"
        do = torch.randn(q.shape[:-1] + v.shape[-1:], generator=torch.Generator().manual_seed(1))
        do = do.to(q.dtype).to(device)
        got = gradients_with(lambda *t: flash.attention(*t, case.is_causal), (q, k, v), (0, 1, 2), do,
                             context)
        want = gradients_with(lambda *t: dense_attention(*t, case.is_causal)[0],
                              [t.double() for t in (q, k, v)], (0, 1, 2), do.double(), context)
        for name, g, g64 in zip(("dq", "dk", "dv"), got, want):
            actual, expected = em.saturated(g, g64)
            em.assert_finite_where_expected(f"{name} is finite", actual, expected, context=context)

"""flash's tanh (the softcap's), against float64 tanh: a few float32 ulp *relative* for every input.

A relative bound, not an absolute one: with a softcap far above the scores, ``c tanh(s / c)`` is
``s`` to first order, so an absolute error ``u`` would move every score by ``c u``. The oracle
checks see tanh only through the softmax; this test sees it alone, over a million inputs from
1e-30 to past the clamp, so a wrong coefficient or clamp fails here by name. On the CPU the
interpreter evaluates it in numpy float32 (no FMA, an IEEE division); compiled on a GPU it runs with
FMAs and a one-reciprocal division, which the same bound covers (the docstring of
:func:`flash.scores.tanh` says how it was measured).
"""

import pytest
import torch
import triton
import triton.language as tl

from flash._runtime import INTERPRET  # sets TRITON_INTERPRET before the kernel below is decorated
from flash.scores import tanh

ULP_BOUND = 8.0
"""flash.scores.tanh measured at most 5.2 float32 ulp with FMAs (its docstring) and 6.13 here in the
interpreter, whose numpy rounds each product and sum apart (at x = 7.0006, where tanh is 1 - 1.7e-6
and P / Q's roundings all count); two ulp of slack over the worst seen. 8 ulp is 4.8e-7 relative:
with a softcap of 30, 1.4e-5 on a score of 30."""


@triton.jit
def _tanh_kernel(X, T, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    tl.store(T + offs, tanh(x), mask=offs < N)


def _inputs() -> torch.Tensor:
    magnitudes = torch.cat([torch.logspace(-30, 1.4, 300_000, dtype=torch.float64),
                            torch.linspace(0, 25, 700_001, dtype=torch.float64)]).float()
    # inf: clamped; NaN: kept (the last entry)
    return torch.cat([magnitudes, -magnitudes, torch.tensor([float("inf"), float("-inf"), float("nan")])])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_tanh_is_within_a_few_ulp_relative(device):
    if device == "cpu" and not INTERPRET:
        pytest.skip("the kernels are compiled for the GPU in this process; the cuda case runs them")
    x = _inputs().to(device)
    t = torch.empty_like(x)
    block = 65536 if device == "cpu" else 1024  # the interpreter pays per program
    _tanh_kernel[(triton.cdiv(x.numel(), block),)](x, t, x.numel(), BLOCK=block)
    x, t = x.cpu().double(), t.cpu().double()
    assert t[-1].isnan(), f"tanh(nan) = {t[-1].item()}: a NaN score must not become a finite one"
    x, t = x[:-1], t[:-1]
    exact = torch.tanh(x)
    # float32's spacing at |tanh(x)|: 2^-23 times the power of two at or below it
    ulp = torch.finfo(torch.float32).eps * 2.0 ** torch.floor(torch.log2(exact.abs().clamp_min(1e-38)))
    error = (t - exact).abs() / ulp
    worst = int(error.argmax())
    assert error[worst] <= ULP_BOUND, (
        f"flash.scores.tanh({x[worst].item()!r}) = {t[worst].item()!r}, float64 tanh "
        f"{exact[worst].item()!r}: "
        f"{error[worst].item():.2f} float32 ulp, bound {ULP_BOUND} ({device})")
    # Odd, bit for bit: a softcap must treat q.k and -q.k alike.
    half = (x.numel() - 2) // 2
    assert torch.equal(t[:half], -t[half:2 * half]), "tanh(-x) != -tanh(x)"

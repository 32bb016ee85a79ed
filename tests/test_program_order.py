"""The interpreter runs a launch's programs in a shuffled order (:mod:`properties.program_order`).

A kernel whose program writes into rows another program owns is right in launch order whenever
the owner runs later and writes over the stray values; these tests show that the suite's order
exposes such a kernel, and that every program still runs exactly once.
"""

import pytest
import torch
import triton
import triton.language as tl

import flash._runtime
from properties import program_order

pytestmark = pytest.mark.skipif(not flash._runtime.INTERPRET,
                                reason="the order of Triton's interpreter; a GPU has its own")


@triton.jit
def _own_row_and_a_stray_one(Out, n, STRAY: tl.constexpr):
    # Program p owns Out[p]; with STRAY it also writes -1 into Out[p + 1], its neighbour's row.
    p = tl.program_id(0)
    tl.store(Out + p, p.to(tl.float32))
    if STRAY:
        tl.store(Out + p + 1, -1.0, mask=p + 1 < n)


def _run(n: int, stray: bool) -> torch.Tensor:
    out = torch.full((n,), float("nan"))
    _own_row_and_a_stray_one[(n,)](out, n, STRAY=stray)
    return out


@pytest.fixture
def restore_order():
    yield
    program_order.install()  # the session's order ($FLASH_PROGRAM_ORDER, set by conftest.py)


def test_every_program_runs_once():
    for n in (1, 2, 7, 64, 1000):
        assert sorted(program_order.permutation(n)) == list(range(n))
        assert torch.equal(_run(n, stray=False), torch.arange(n, dtype=torch.float32))


def test_a_stray_store_into_a_later_program_s_row_shows(restore_order):
    n = 64
    program_order.install("launch")
    assert torch.equal(_run(n, stray=True), torch.arange(n, dtype=torch.float32)), \
        "in launch order each owner runs after its neighbour's stray store, and hides it"
    assert program_order.install("shuffled")
    wrong = (_run(n, stray=True) == -1).sum().item()
    assert wrong > 0, "the shuffled order ran every owner after its neighbour, as launch order does"


def test_the_order_is_fixed_for_a_grid_size():
    assert program_order.permutation(50) == program_order.permutation(50)
    assert program_order.permutation(50) != tuple(range(50))

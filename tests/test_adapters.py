"""The kernel modules users compare against (``oracle/adapters``: SDPA per backend, FlexAttention):
what each declares and a handful of the suite's checks on small cases with features; and, on a GPU
with ``--kernel`` naming one of them, its declarations and the limits its docstring states.

On the CPU, flex runs here through its eager path (``flex_attention`` uncompiled, the unfused
reference), forward only: torch 2.13 has no flex backward on the CPU, which is why the module
declares ``DEVICE_TYPES = {"cuda"}``. That still runs all of the adapter's own code (heads folded
into the batch, the mask and softcap functions, the lse) and shows how many graphs Dynamo makes of
it; gradients through that code run with a dense stand-in for the kernel.
"""

import types

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask, flex_attention

from properties import (
    Case,
    check_bottom_right_square_exact,
    check_causal_gradients_ignore_future,
    check_deterministic,
    check_empty_rows,
    check_gqa_matches_repeated_kv,
    check_gradients_match_oracle,
    check_lse_matches_oracle,
    check_output_matches_oracle,
    check_scale_matches_prescaled_q,
    check_softcap,
    check_window_hides_keys,
    load_kernel,
)
from properties.kernels import FEATURE_NAMES, NotApplicable, features

SDPA = ["oracle.adapters.sdpa", "oracle.adapters.sdpa_math", "oracle.adapters.sdpa_flash",
        "oracle.adapters.sdpa_efficient", "oracle.adapters.sdpa_cudnn"]
MODULES = [*SDPA, "oracle.adapters.flex"]
CUDA_ONLY = ["oracle.adapters.sdpa_efficient", "oracle.adapters.sdpa_cudnn", "oracle.adapters.flex"]

SDPA_CHECKS = [check_output_matches_oracle, check_gradients_match_oracle, check_empty_rows,
               check_gqa_matches_repeated_kv, check_bottom_right_square_exact,
               check_scale_matches_prescaled_q, check_causal_gradients_ignore_future, check_deterministic]
FLEX_FORWARD_CHECKS = [check_output_matches_oracle, check_lse_matches_oracle, check_softcap,
                       check_scale_matches_prescaled_q]
FLEX_GPU_CHECKS = list(dict.fromkeys([*FLEX_FORWARD_CHECKS, *SDPA_CHECKS, check_window_hides_keys]))


def feature_cases(dtype: str) -> list[Case]:
    """Small cases that use the features, odd lengths and head dims, a non-contiguous layout."""
    return [
        Case(33, 47, 24, (2, 3), dtype, True, seed=1),
        Case(40, 23, 16, (2, 4), dtype, True, "heads_last", kv_heads=2, causal_alignment="bottom_right",
             seed=2),
        Case(17, 17, 32, (3,), dtype, False, "strided", softmax_scale=0.2, seed=3),
    ]


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_on_cpu_and_declares_known_features(name):
    kernel = load_kernel(name)
    assert features(kernel) <= set(FEATURE_NAMES)
    assert all(isinstance(d, torch.dtype) for d in getattr(kernel, "SUPPORTED_DTYPES", ()))


@pytest.mark.parametrize("name", CUDA_ONLY)
def test_cuda_only_module_is_not_applicable_on_cpu(name):
    with pytest.raises(NotApplicable, match="DEVICE_TYPES"):
        check_output_matches_oracle(load_kernel(name), Case(3, 5, 16, (2,), "float16"), "cpu")


@pytest.mark.parametrize("check", SDPA_CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("name, dtype", [("oracle.adapters.sdpa", "float32"),
                                         ("oracle.adapters.sdpa_math", "float32"),
                                         ("oracle.adapters.sdpa_flash", "float16")])
def test_sdpa_on_cpu(name, dtype, check):
    kernel = load_kernel(name)
    for case in feature_cases(dtype):
        check(kernel, case, "cpu")


@pytest.fixture
def eager_flex(monkeypatch):
    """``oracle.adapters.flex`` with flex uncompiled and its device limit lifted (CPU, forward only)."""
    import oracle.adapters.flex as flex

    monkeypatch.setattr(flex, "_flex", flex_attention)
    return types.SimpleNamespace(
        __name__="oracle.adapters.flex (eager, CPU)", attention=flex.attention,
        attention_with_lse=flex.attention_with_lse, FEATURES=flex.FEATURES,
        SUPPORTED_DTYPES=flex.SUPPORTED_DTYPES, MIN_HEAD_DIM=flex.MIN_HEAD_DIM)


FLEX_CASES = [
    Case(9, 30, 16, (), "float32", True, "offset", window=(3, 2), softcap=5.0, seed=4),
    Case(40, 23, 16, (2, 4), "float16", True, "heads_last", kv_heads=2, causal_alignment="bottom_right",
         seed=2),
    Case(20, 31, 16, (2, 1, 3), "float32", False, "mixed", window=(4, -1), causal_alignment="bottom_right",
         seed=5),
]


EAGER = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
"""The eager path is the point of the CPU tests; flex's advice to compile is not news."""


@EAGER
@pytest.mark.parametrize("check", FLEX_FORWARD_CHECKS, ids=lambda check: check.__name__)
def test_flex_forward_on_cpu(eager_flex, check):
    for case in FLEX_CASES:
        check(eager_flex, case, "cpu")


@EAGER
def test_flex_rows_that_see_no_key_on_cpu(eager_flex):
    """``o = 0`` and ``lse = -inf`` there, no NaN anywhere (the forward half of ``check_empty_rows``,
    which needs gradients, and runs on the GPU)."""
    case = Case(20, 7, 16, (2,), "float32", True, kv_heads=1, causal_alignment="bottom_right")
    q, k, v = case.make_qkv("cpu")
    with torch.no_grad():
        o, lse = eager_flex.attention_with_lse(q, k, v, True, causal_alignment="bottom_right")
    empty = case.n_q - case.n_k  # bottom-right: rows 0..12 see no key
    assert not o.isnan().any() and not lse.isnan().any()
    assert torch.equal(o[..., :empty, :], torch.zeros_like(o[..., :empty, :]))
    assert torch.isneginf(lse[..., :empty]).all() and torch.isfinite(lse[..., empty:]).all()


def _dense_flex(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False, return_aux=None,
               kernel_options=None):
    """A differentiable stand-in for compiled flex on the CPU, written from flex's documented
    semantics (the block mask's ``mask_mod``, then ``score_mod`` on the scaled scores)."""
    k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    s = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale
    s = score_mod(s, None, None, None, None) if score_mod else s
    seen = create_mask(block_mask.mask_mod, None, None, q.shape[-2], k.shape[-2], q.device)
    s = s.masked_fill(~seen, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row that sees no key: 0, as flex's kernel
    o = torch.matmul(p, v.float()).to(q.dtype)
    return o, types.SimpleNamespace(lse=torch.logsumexp(s, dim=-1))


def test_flex_backward_through_the_adapter_on_cpu(monkeypatch):
    """Gradients reach q, k, v through the adapter's own code (heads folded into the batch, copies,
    :class:`_Flex`), with a dense stand-in for the kernel, which has no CPU backward."""
    import oracle.adapters.flex as flex

    monkeypatch.setattr(flex, "_flex", _dense_flex)
    kernel = types.SimpleNamespace(__name__="oracle.adapters.flex (dense stand-in, CPU)",
                                   attention=flex.attention, FEATURES=flex.FEATURES)
    for case in FLEX_CASES:
        check_gradients_match_oracle(kernel, case, "cpu")


def test_flex_compiles_one_graph_for_every_length_layout_and_mask(monkeypatch):
    """The compile-cost design (``oracle/adapters/flex.py``): after the first call, new lengths,
    batch sizes, leading dims, layouts, causal flags, windows and alignments reuse its graph."""
    import oracle.adapters.flex as flex

    counters = torch._dynamo.utils.counters
    monkeypatch.setattr(flex, "_flex", torch.compile(flex_attention, backend="eager", dynamic=True))
    cases = [Case(65, 97, 16, (2, 2), "float32", True),
             Case(300, 130, 16, (2, 3), "float32", False, "heads_last", window=(5, 7)),
             Case(63, 301, 16, (3,), "float32", True, "broadcast_kv", causal_alignment="bottom_right"),
             Case(129, 128, 16, (2, 1, 2), "float32", True, "mixed", window=(3, -1))]
    before = None
    for case in cases:
        q, k, v = case.make_qkv("cpu")
        with torch.no_grad():
            flex.attention_with_lse(q, k, v, case.is_causal, **case.features())
        before = before if before is not None else counters["stats"]["unique_graphs"]
    assert counters["stats"]["unique_graphs"] == before


def test_sdpa_flash_takes_a_head_dim_of_one_with_a_last_stride_other_than_one():
    """Found by the CPU conformance report (2026-12-01): the adapter took a last dim of one element
    as unit-strided whatever its stride, and SDPA's forced flash backend, which reads ``stride(-1)``
    there too, found no kernel ("No available kernel"). The adapter now copies such an input."""
    from properties import Case, check_causal_future_ignored, load_kernel
    from tests.helpers import run_check

    case = Case(n_q=1, n_k=1, head_dim=1, leading=(), dtype="float16", is_causal=False,
                layout="strided", distribution="normal", scale=1.0, seed=0)
    run_check(check_causal_future_ignored, load_kernel("oracle.adapters.sdpa_flash"), case)


def test_flex_compiles_with_sizes_evaluated_by_value(monkeypatch):
    """``oracle.adapters.flex._inductor``: Dynamo traces size-obliviously, Inductor (and with it the
    backward) compiles with that off; compiled size-obliviously, the backward kept its first call's
    strides and failed every later length on the H200 (2026-12-01)."""
    import torch._inductor.compile_fx
    import torch.fx.experimental._config as fx_config

    import oracle.adapters.flex as flex

    seen = []
    monkeypatch.setattr(torch._inductor.compile_fx, "compile_fx",
                        lambda gm, inputs: seen.append(fx_config.backed_size_oblivious) or "compiled")
    with flex._settings():
        assert fx_config.backed_size_oblivious
        assert flex._inductor(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()), []) == "compiled"
    assert seen == [False]


# -- on a GPU, with --kernel naming the module: its declarations and the limits its docstring states --


def _require_kernel(kernel, names) -> None:
    # Each module's GPU tests compile and run it, so they run in that module's own GPU run only.
    if kernel.__name__ not in names:
        pytest.skip(f"runs with --kernel {' or '.join(names)}")


GPU_CASES = [
    Case(129, 200, 64, (2, 4), "float16", True, "heads_last", kv_heads=2, causal_alignment="bottom_right",
         seed=1),
    Case(200, 129, 40, (2,), "bfloat16", True, causal_alignment="bottom_right", softmax_scale=0.3, seed=2),
    Case(97, 97, 128, (1, 3), "float16", True, "strided", seed=3),
]


@pytest.mark.gpu
@pytest.mark.parametrize("check", SDPA_CHECKS, ids=lambda check: check.__name__)
def test_sdpa_declarations_hold_on_gpu(kernel, check):
    _require_kernel(kernel, SDPA)
    for case in GPU_CASES:
        try:
            check(kernel, case)
        except NotApplicable:
            pass  # a feature or dtype the module does not declare: n/a, as the suite reports it


@pytest.mark.gpu
@pytest.mark.parametrize("name, case", [
    ("oracle.adapters.sdpa_flash", Case(65, 97, 64, (2, 2), "float16", True)),  # top-left, n_q != n_k
    ("oracle.adapters.sdpa_efficient", Case(65, 97, 60, (2, 2), "float16")),  # head dim % 8 != 0
    ("oracle.adapters.sdpa_cudnn", Case(65, 97, 60, (2, 2), "float16")),  # head dim % 8 != 0
    ("oracle.adapters.sdpa_cudnn", Case(65, 1, 64, (2, 2), "float16")),  # n_k = 1
], ids=str)
def test_sdpa_limit_the_docstring_states_is_no_available_kernel(kernel, name, case):
    _require_kernel(kernel, [name])
    q, k, v = case.make_qkv("cuda")
    assert kernel.unsupported(q, k, v, case.is_causal), "the limit is not declared by unsupported()"
    with pytest.raises(RuntimeError, match="No available kernel"):
        kernel.attention(q, k, v, case.is_causal)


@pytest.mark.gpu
@pytest.mark.parametrize("check", FLEX_GPU_CHECKS, ids=lambda check: check.__name__)
def test_flex_on_gpu(kernel, check):
    _require_kernel(kernel, ["oracle.adapters.flex"])
    for case in [*GPU_CASES, *FLEX_CASES]:
        check(kernel, case)


def test_subnormal_float16_gradients_of_sdpa_on_the_cpu_pass():
    """A false alarm of the error model, kept: SDPA's CPU backward on ``tiny`` float16 values gets a
    subnormal ``dk`` 2.2 subnormal spacings off, which ``error_model.underflow``'s ``sqrt(terms)``
    allows (2026-12-01; before, the check failed a correct kernel)."""
    from properties import Case, check_gradients_match_oracle, load_kernel
    from tests.helpers import run_check

    case = Case(n_q=129, n_k=129, head_dim=16, leading=(1, 1), dtype="float16", is_causal=False,
                distribution="tiny", scale=0.00390625, seed=0)
    run_check(check_gradients_match_oracle, load_kernel("oracle.adapters.sdpa"), case)


def test_flex_block_mask_kept_from_inference_mode_is_a_normal_tensor():
    """The flex adapter keeps a block mask per shape (``_block_mask``); one built by a first call
    under ``torch.inference_mode()`` must still be savable for backward by later training calls
    (``check_inference_mode``, which runs flex on a GPU only). ``create_block_mask`` there makes
    inference tensors; the adapter builds it outside inference mode."""
    from oracle.adapters import flex

    with torch.inference_mode():
        mask = flex._block_mask(37, 41, torch.device("cpu"), True, 0, -1, 5)
    tensors = [t for t in vars(mask).values() if isinstance(t, torch.Tensor)]
    assert tensors and not any(t.is_inference() for t in tensors)

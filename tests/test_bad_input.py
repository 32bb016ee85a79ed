"""Bad arguments to the kernel get a TypeError or ValueError naming the argument, never a crash.

These test ``flash`` itself (not ``--kernel``): the messages are this project's promise.
"""

from fractions import Fraction

import numpy as np
import pytest
import torch

import flash

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def t(*shape, dtype=torch.float32, device=DEVICE):
    return torch.randn(*shape, device=device).to(dtype)


GOOD = (t(2, 8, 16), t(2, 8, 16), t(2, 8, 16))

BAD = [
    # (q, k, v, is_causal, error, message fragment)
    pytest.param(t(16), GOOD[1], GOOD[2], False, ValueError, "q must have shape .*rank >= 2", id="rank-q"),
    pytest.param(GOOD[0], t(16), GOOD[2], False, ValueError, "k must have shape .*rank >= 2", id="rank-k"),
    pytest.param(GOOD[0], GOOD[1], torch.tensor(1.0), False, ValueError, "v must have shape", id="rank-v"),
    pytest.param(t(2, 2, 8, 16), t(3, 2, 8, 16), t(3, 2, 8, 16), False, ValueError, "same leading dims", id="leading"),
    pytest.param(GOOD[0], t(3, 8, 16), t(3, 8, 16), False, ValueError, "multiple of k's and v's", id="heads-not-a-multiple"),
    # More query heads than kv heads, still not a multiple (a check of h_q >= h_kv alone passes it).
    pytest.param(t(3, 8, 16), GOOD[1], GOOD[2], False, ValueError, "multiple of k's and v's", id="heads-more-not-a-multiple"),
    pytest.param(t(4, 8, 16), t(2, 8, 16), t(1, 8, 16), False, ValueError, "same number of heads", id="kv-heads-differ"),
    pytest.param(t(2, 2, 8, 16), t(2, 8, 16), t(2, 8, 16), False, ValueError, "same leading dims", id="rank-mismatch"),
    pytest.param(GOOD[0], t(2, 8, 32), GOOD[2], False, ValueError, "same head dim", id="head-dim-k"),
    pytest.param(GOOD[0], GOOD[1], t(2, 8, 32), False, ValueError, "same head dim", id="head-dim-v"),
    pytest.param(GOOD[0], t(2, 9, 16), GOOD[2], False, ValueError, "k and v must have the same length", id="kv-length"),
    pytest.param(GOOD[0], GOOD[1], t(2, 8, 16, dtype=torch.float16), False, TypeError, "share one dtype", id="mixed-dtype"),
    pytest.param(*(t(2, 8, 16, dtype=torch.int32) for _ in range(3)), False, TypeError, "q has dtype torch.int32", id="int"),
    pytest.param(*(t(2, 8, 16, dtype=torch.float64) for _ in range(3)), False, TypeError, "float64", id="float64"),
    pytest.param(t(2, 0, 16), GOOD[1], GOOD[2], False, ValueError, "q is empty", id="empty-q"),
    pytest.param(GOOD[0], t(2, 0, 16), t(2, 0, 16), False, ValueError, "k is empty", id="empty-k"),
    pytest.param(t(0, 8, 16), t(0, 8, 16), t(0, 8, 16), False, ValueError, "zero-size leading dim", id="empty-batch"),
    pytest.param(t(2, 8, 0), t(2, 8, 0), t(2, 8, 0), False, ValueError, r"head dim .* \[1, 256\], got 0", id="head-dim-0"),
    pytest.param(t(1, 8, 257), t(1, 8, 257), t(1, 8, 257), False, ValueError, r"\[1, 256\], got 257", id="head-dim-257"),
    pytest.param(*GOOD, "yes", TypeError, "is_causal must be a bool", id="is-causal"),
    pytest.param([[1.0]], GOOD[1], GOOD[2], False, TypeError, "q must be a torch.Tensor", id="not-a-tensor"),
]


@pytest.mark.parametrize("q, k, v, is_causal, error, message", BAD)
@pytest.mark.parametrize("entry", ["attention", "attention_with_lse", "flash_attention_forward"])
def test_bad_input_raises(entry, q, k, v, is_causal, error, message):
    with pytest.raises(error, match=message):
        getattr(flash, entry)(q, k, v, is_causal)


@pytest.mark.parametrize("block", [8, 48, 0])
def test_bad_tile_size(block):
    with pytest.raises(ValueError, match="block_q must be a power of two >= 16"):
        flash.flash_attention_forward(*GOOD, block_q=block)


@pytest.mark.gpu
def test_mixed_devices():
    with pytest.raises(ValueError, match="one device"):
        flash.attention(GOOD[0].cuda(), GOOD[1].cpu(), GOOD[2].cuda())


@pytest.mark.gpu
def test_cpu_tensors_with_compiled_kernel():
    if flash.INTERPRET:
        pytest.skip("the interpreter runs on CPU tensors by design")
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        flash.attention(*(x.cpu() for x in GOOD))


def test_mixed_devices_on_cpu_meta():
    # Without a GPU, a second device is the meta device: the check must name it, not crash.
    with pytest.raises(ValueError, match="one device"):
        flash.attention(GOOD[0], GOOD[1].to("meta"), GOOD[2])


BAD_FEATURES = [
    # (feature arguments, error, message fragment)
    pytest.param(dict(scale=float("nan")), ValueError, "scale must be finite", id="scale-nan"),
    pytest.param(dict(scale=float("inf")), ValueError, "scale must be finite", id="scale-inf"),
    pytest.param(dict(scale="0.1"), TypeError, "scale must be None or a real number", id="scale-str"),
    pytest.param(dict(scale=True), TypeError, "scale must be None or a real number", id="scale-bool"),
    pytest.param(dict(softcap=-1.0), ValueError, "softcap must be >= 0", id="softcap-negative"),
    pytest.param(dict(softcap=float("inf")), ValueError, "softcap must be finite", id="softcap-inf"),
    pytest.param(dict(window=(-2, 0)), ValueError, "window's left bound must be >= -1", id="window-left"),
    pytest.param(dict(window=(0, -5)), ValueError, "window's right bound must be >= -1", id="window-right"),
    pytest.param(dict(window=(1.5, 0)), TypeError, "window's left bound must be an int", id="window-float"),
    pytest.param(dict(window=4), TypeError, "window must be None or a pair", id="window-int"),
    pytest.param(dict(window=(1, 2, 3)), TypeError, "window must be None or a pair", id="window-triple"),
    pytest.param(dict(causal_alignment="bottom"), ValueError, "causal_alignment must be one of", id="alignment"),
]


@pytest.mark.parametrize("features, error, message", BAD_FEATURES)
@pytest.mark.parametrize("entry", ["attention", "attention_with_lse", "flash_attention_forward"])
def test_bad_feature_raises(entry, features, error, message):
    with pytest.raises(error, match=message):
        getattr(flash, entry)(*GOOD, True, **features)


@pytest.mark.parametrize("features, error, message", BAD_FEATURES)
@pytest.mark.parametrize("entry", ["attention_varlen", "attention_varlen_with_lse"])
def test_bad_feature_raises_varlen(entry, features, error, message):
    q = t(8, 2, 16)
    cu = torch.tensor([0, 3, 8], dtype=torch.int32, device=DEVICE)
    with pytest.raises(error, match=message):
        getattr(flash, entry)(q, q, q, cu, cu, 5, 5, True, **features)


NUMERIC_FEATURES = [
    # Reals and ints of other types than float and int: the same call as with float() / int().
    pytest.param(dict(scale=np.float32(0.3)), id="scale-np-float32"),
    pytest.param(dict(scale=np.float64(-0.2)), id="scale-np-float64"),
    pytest.param(dict(scale=Fraction(1, 3)), id="scale-fraction"),
    pytest.param(dict(scale=np.int64(1)), id="scale-np-int64"),
    pytest.param(dict(softcap=np.float32(2.5)), id="softcap-np-float32"),
    pytest.param(dict(window=(np.int64(3), np.int32(1))), id="window-np-ints"),
]


def _as_builtin(features: dict) -> dict:
    return {name: tuple(int(b) for b in value) if name == "window" else float(value)
            for name, value in features.items()}


@pytest.mark.parametrize("features", NUMERIC_FEATURES)
def test_numeric_feature_types_accepted(features):
    q = t(8, 2, 16)
    cu = torch.tensor([0, 3, 8], dtype=torch.int32, device=DEVICE)
    for call in (lambda f: flash.attention_with_lse(*GOOD, True, **f),
                 lambda f: flash.attention_varlen_with_lse(q, q, q, cu, cu, 5, 5, True, **f)):
        got, want = call(features), call(_as_builtin(features))
        for a, b in zip(got, want):
            assert torch.equal(a, b), f"{features} computes otherwise than {_as_builtin(features)}"


def test_numpy_bool_is_not_a_scale():
    with pytest.raises(TypeError, match="scale must be None or a real number"):
        flash.attention(*GOOD, scale=np.bool_(True))

"""Streams: a call on a CUDA side stream is ordered like any PyTorch op on that stream.

PyTorch runs each op on the caller's *current* stream, so work queued on one stream happens in
order, and code that overlaps copies with compute (a serving loop, a pipeline stage, anything
inside ``torch.cuda.stream(s)``) relies on it. A kernel launched on another stream (the default
stream, a stream of its own, a handle cached from the first call) without ordering itself against
the caller's reads its inputs before the caller's earlier work has written them, or hands over an
output still being written. Every other check calls the kernel on the default stream, where such a
kernel is right: these are the ones that look.

:func:`check_current_stream` queues on a side stream a long GPU sleep, then the copies that fill
q, k, v and the upstream gradient (until then every byte is NaN), then the forward, the backward,
and copies of every result; a call on any other stream runs during the sleep and reads the NaNs.
:func:`properties.varlen.check_varlen_current_stream` does the same for packed calls
(:func:`on_side_stream`, with the offsets filled behind the sleep too).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch

from properties import _common
from properties.case import Case
from properties.kernels import NotApplicable, default_device, gated, kernel_name

SLEEP_CYCLES = (50_000_000, 200_000_000, 800_000_000)
"""GPU clock cycles of the sleep queued ahead of the inputs (about 25 ms, 0.1 s and 0.4 s on an
H200's 1.98 GHz), longer each try: only a try in which the sleep was still running when the host had
queued everything tests the order. A call that synchronizes with the stream on the host (``.item()``
on a tensor there) waits out any sleep: the check then compares the results and is n/a."""


def on_side_stream(calls: Callable[[dict], dict], inputs: dict, ctx: str) -> tuple[dict, bool]:
    """``calls(twins)`` (the results of a round of calls on ``twins``, tensors or None by name)
    queued on a new stream behind a sleep and the copies that fill the twins of ``inputs``
    (:func:`properties._common.nan_twins`), each result copied on that stream once the calls return;
    and whether the sleep was still running once the host had queued all of it (else the order was
    not tested: retried with a longer sleep)."""
    device = inputs["q"].device
    for cycles in SLEEP_CYCLES:
        torch.cuda.synchronize(device)
        twins, fills = _common.nan_twins(inputs)
        side = torch.cuda.Stream(device)
        slept = torch.cuda.Event()
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
            slept.record(side)
            with torch.no_grad():
                for source, twin in fills:
                    twin.copy_(source)
            with _common.crash_is_failure(ctx, "the calls on a side stream"):
                got = calls(twins)
            got = {name: None if t is None else t.clone() for name, t in got.items()}
        conclusive = not slept.query()  # still sleeping: everything above was queued behind it
        torch.cuda.synchronize(device)
        if conclusive:
            break
    return got, conclusive


@gated
def check_current_stream(kernel: ModuleType, case: Case, device=None) -> None:
    """On CUDA, the forward (``attention_with_lse`` if the module has it, and ``attention``) and the
    backward run inside ``torch.cuda.stream(side)`` behind a sleep and the copies that fill their
    inputs (NaN until then), their results copied on ``side`` once they return, agree with the same
    calls on the default stream within twice each result's error-model bound (so a bug that shows in
    every call is the oracle checks' to report, and a kernel whose bits vary from call to call is not
    held to bits here). A call that runs on any other stream than the caller's current one, or does
    not order its work before the caller's next, reads NaN or hands over unfinished results (the
    contract, ``properties/kernels.py``). n/a off CUDA: the CPU has no streams."""
    device = cuda_device("check_current_stream", device)
    ctx = _common.context("check_current_stream", kernel, case)
    q, k, v = case.make_qkv(device)
    do = case.make_grad_out(device)
    f = case.features()
    want = _common.results(kernel, q, k, v, do, case.is_causal, f)
    got, conclusive = on_side_stream(
        lambda t: _common.results(kernel, t["q"], t["k"], t["v"], t["do"], case.is_causal, f),
        {"q": q, "k": k, "v": v, "do": do}, ctx)
    _common.assert_results_agree(got, want, q, k, v, do, case.is_causal, "the call inside "
                                 "torch.cuda.stream(side), behind a sleep and its inputs' copies, vs on the "
                                 "default stream", ctx, **f)
    if not conclusive:
        raise inconclusive("check_current_stream", kernel, case)


def cuda_device(check: str, device) -> torch.device:
    """``device`` (default: :func:`~properties.kernels.default_device`) if it is a CUDA device; else
    the stream check ``check`` is n/a: the CPU has no streams."""
    device = torch.device(device or default_device())
    if device.type != "cuda":
        raise NotApplicable(f"{check} runs on CUDA devices only (streams), not {device.type}")
    return device


def inconclusive(check: str, kernel: ModuleType, case) -> NotApplicable:
    """What a stream check raises when its calls waited out every sleep (their results agreed)."""
    return NotApplicable(
        f"{check} on kernel {kernel_name(kernel)}, {case}: the host had not queued the calls when a "
        f"{SLEEP_CYCLES[-1]}-cycle GPU sleep ahead of them ended: the calls wait on the host for the "
        "caller's stream (a synchronization), so their order on it could not be tested (their "
        "results agreed)")

"""The process's state, which a call must leave as it found it, and the check that holds it
in a fresh process.

A kernel can be right in every output and still change what the caller computes next: one that
turns TF32 on for its own speed (at import or at each call) makes every float32 matmul after it
less precise; one that draws from the caller's random generator (a random tile order, a warm-up on
random data) shifts every dropout mask and sampled token after it, so a seeded run no longer
reproduces. :func:`process_settings` reads that state; the side-effect checks
(``check_inputs_unchanged``, ``check_varlen_inputs_unchanged``) compare it before and after each
call. A switch set to the same value at every call shows there only at the process's first call
(later, it is already set), so :func:`check_fresh_process` runs one such check first thing in a
new Python process, after comparing the state before and after importing the kernel module.
A save and restore that restores torch's defaults instead of the caller's values shows only when
the caller's values are not the defaults, so the side-effect checks make one more round of calls
under :func:`settings_off_default`, which moves the settings that change nothing a call computes
(deterministic algorithms' ``warn_only`` while they are off, the thread count) and two of SDPA's
backend switches (flash and cuDNN off: a plain SDPA call takes another backend; that round compares
no result). The others are never flipped: once both the legacy TF32 switches and the new
``fp32_precision`` API have been set, torch refuses to read the matmul precision at all, and the
rest change what a call computes or which kernels it may use, which the contract does not promise
to serve.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import warnings
from types import ModuleType

import torch

from properties import _common
from properties.kernels import NotApplicable, default_device, kernel_name

_SETTINGS = {
    # name in the message: how to read it. Settings a torch build lacks are left out.
    "torch.is_grad_enabled()": torch.is_grad_enabled,
    "torch.is_inference_mode_enabled()": torch.is_inference_mode_enabled,
    "torch.get_default_dtype()": torch.get_default_dtype,
    "torch.get_num_threads()": torch.get_num_threads,
    "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "torch.backends.fp32_precision": lambda: torch.backends.fp32_precision,  # the new API (torch 2.9)
    "torch.backends.cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,
    "torch.backends.cudnn.fp32_precision": lambda: torch.backends.cudnn.fp32_precision,
    "torch.backends.cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
    "torch.backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled,
    "torch.is_deterministic_algorithms_warn_only_enabled()":
        torch.is_deterministic_algorithms_warn_only_enabled,
    **{f"torch.backends.cuda.{name}()": getattr(torch.backends.cuda, name, None) for name in (
        "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled")},
}


def process_settings(device: torch.device) -> dict[str, object]:
    """The process-wide state a call must leave as it found it (the contract,
    ``properties/kernels.py``): the random generators (torch's CPU and device ones; Python's
    ``random`` and numpy's global one, which a kernel's host code may draw from), grad and
    inference mode, autocast, the default dtype, the thread count, the matmul precision and TF32
    switches, determinism, and SDPA's backend switches; on CUDA also the current device and stream.

    A kernel that turns TF32 on for its own speed makes every float32 matmul after it less precise;
    one that draws from the caller's generator (a random tile order, a warm-up on random data)
    shifts every dropout mask and sample after it, so a seeded run no longer reproduces. Neither
    shows in the kernel's own outputs, so no other check can see it."""
    settings: dict[str, object] = {}
    with warnings.catch_warnings():  # some of these getters are deprecated in newer torch builds
        warnings.simplefilter("ignore")
        for name, read in _SETTINGS.items():
            try:
                settings[name] = read()
            except (AttributeError, TypeError, RuntimeError):
                # A getter this build lacks (None: TypeError), or one that refuses to answer (reading
                # the TF32 switches after both their legacy and their new API were used raises).
                continue
        settings[f"torch.is_autocast_enabled({device.type!r})"] = torch.is_autocast_enabled(device.type)
    settings["torch.get_rng_state()"] = torch.get_rng_state()
    settings["random.getstate()"] = _Generator(random.getstate())
    numpy = sys.modules.get("numpy")  # None: neither the suite nor the kernel imported it yet
    if numpy is not None:  # any bit generator (np.random.set_bit_generator): its state is a dict
        settings["numpy.random.get_state()"] = _Generator(_frozen(numpy.random.get_state(legacy=False)))
    if device.type == "cuda":
        settings["torch.cuda.current_device()"] = torch.cuda.current_device()
        settings[f"torch.cuda.current_stream({device})"] = torch.cuda.current_stream(device).cuda_stream
        settings[f"torch.cuda.get_rng_state({device})"] = torch.cuda.get_rng_state(device)
    return settings


@contextlib.contextmanager
def settings_off_default():
    """Within: deterministic algorithms' ``warn_only`` on (while they are off it changes nothing),
    another thread count (1, or 2 where it was 1), and SDPA's flash and cuDNN backends off (where
    they were on), restored on exit; yields what it moved, for a message. A call that saves a setting
    and restores torch's default (``use_deterministic_algorithms(was)`` resets ``warn_only``) leaves
    the process as it found it only from the defaults; one that restores each SDPA switch from
    another's saved value (``enable_cudnn_sdp(efficient_was)``) only while the two agree, which
    they do from the defaults (all on) and here do not (flash and cuDNN off, memory-efficient and
    math on).

    The SDPA switches choose only which backend a plain ``scaled_dot_product_attention`` may take:
    the math backend, left on, serves every input, ``torch.nn.attention.sdpa_kernel`` sets its own
    choice for its scope, and this round compares no result."""
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    deterministic = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    moves = [(f"torch.set_num_threads({1 if threads > 1 else 2})",
              lambda: torch.set_num_threads(1 if threads > 1 else 2))]
    if not warn_only:
        moves.insert(0, (f"torch.use_deterministic_algorithms({deterministic}, warn_only=True)",
                         lambda: torch.use_deterministic_algorithms(deterministic, warn_only=True)))
    sdp = [(name, getattr(torch.backends.cuda, f"{name}_sdp_enabled")())
           for name in _SDP_MOVED if hasattr(torch.backends.cuda, f"enable_{name}_sdp")]
    moves += [(f"torch.backends.cuda.enable_{name}_sdp(False)", _switch(name, False))
              for name, on in sdp if on]
    try:
        for _, move in moves:
            move()
        yield ", ".join(said for said, _ in moves)
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.set_num_threads(threads)
        for name, on in sdp:
            _switch(name, on)()


_SDP_MOVED = ("flash", "cudnn")
"""The SDPA backends :func:`settings_off_default` turns off: two of the four, so that a restore
crossed between a moved and an unmoved switch changes one."""


def _switch(name: str, on: bool):
    """A call that sets SDPA's ``name`` backend switch to ``on``."""
    return lambda: getattr(torch.backends.cuda, f"enable_{name}_sdp")(on)


DEFAULT_DTYPES = (torch.float64, torch.bfloat16)
"""Default dtypes callers set (``torch.set_default_dtype``): float64 in scientific code, bfloat16
where a model is built in it. A call's results are the same under either as under float32
(``check_default_dtype_ignored``, ``check_varlen_default_dtype_ignored``)."""


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """Within: torch's default dtype is ``dtype``; the caller's is restored on exit."""
    was = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(was)


def _frozen(state: object) -> object:
    """A generator state of dicts, lists and arrays as nested tuples, comparable with ``==``."""
    if isinstance(state, dict):
        return tuple((key, _frozen(value)) for key, value in sorted(state.items()))
    if isinstance(state, (list, tuple)):
        return tuple(_frozen(item) for item in state)
    if hasattr(state, "tobytes"):  # a numpy array (MT19937's key)
        return type(state).__name__, str(getattr(state, "dtype", "")), state.tobytes()
    return state


class _Generator(tuple):
    """A Python-side generator's state (a tuple), told apart so that a change is named as a draw, not
    printed (Python's state is 625 integers)."""


def changed_settings(before: dict[str, object], now: dict[str, object]) -> dict[str, str]:
    """Each of :func:`process_settings` that differs between ``before`` and ``now``: what happened to it."""
    changed = {}
    for name, was in before.items():
        is_now = now.get(name)
        if name not in now:  # its getter raises now (the TF32 APIs, both set): a change too
            changed[name] = f"{name} was {was!r}, and can no longer be read"
        elif isinstance(was, (torch.Tensor, _Generator)):  # a generator's state: the call drew from it
            if not (torch.equal(was, is_now) if isinstance(was, torch.Tensor) else is_now == was):
                changed[name] = f"{name} changed (the call drew from, or reseeded, the caller's generator)"
        elif is_now != was:
            changed[name] = f"{name} was {was!r}, is now {is_now!r}"
    return changed


def assert_settings_unchanged(before: dict[str, object], now: dict[str, object], when: str,
                              context: str) -> None:
    """Every one of :func:`process_settings` as it was; the message names each that changed."""
    changed = changed_settings(before, now)
    if changed:
        raise AssertionError(
            f"process-wide state after {when}: {context}: {'; '.join(changed.values())} (bound: equality; "
            "a call must leave the process's settings and random generators as it found them)")


_NOT_APPLICABLE = 3
"""The exit status of :func:`main` for a check that does not apply (its reason on stdout)."""

_CHILD = "import sys; from properties.process_state import main; sys.exit(main(sys.argv[1:]))"
"""The child's program (``python -c``; ``-m`` would import this module twice, as the package's and
as ``__main__``)."""


def check_fresh_process(kernel: ModuleType, case, device=None, timeout: float = 900) -> None:
    """In a new Python process (:func:`main`, with this one's environment and import path):
    importing the kernel module leaves :func:`process_settings` as they were, and so does the
    process's first round of calls, through ``check_inputs_unchanged`` for a
    :class:`~properties.case.Case` or ``check_varlen_inputs_unchanged`` for a
    :class:`~properties.varlen_case.VarlenCase` (their other parts hold too).

    Not one of :data:`properties.ALL_CHECKS`: each call starts a Python process (seconds), so a few
    cases in ``tests/test_process_state.py`` run it, not every grid case. A module the suite itself
    imports before the kernel's (``oracle.adapters.mock``, say) shows nothing at its import."""
    ctx = _common.context("check_fresh_process", kernel, case)
    device = torch.device(device or default_device())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("PYTEST_XDIST_WORKER", None)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, kernel_name(kernel), str(case), str(device)],
        capture_output=True, text=True, timeout=timeout, env=env)
    said = (child.stdout.strip() or child.stderr.strip()).splitlines()
    if child.returncode == 0:
        return
    if child.returncode == _NOT_APPLICABLE:
        raise NotApplicable(said[-1] if said else "not applicable")
    if child.returncode == 1 and said:
        raise AssertionError(f"{ctx}: in a fresh process: {said[-1]}")
    tail = "\n".join(child.stderr.strip().splitlines()[-15:])
    raise AssertionError(f"{ctx}: the fresh process ended with exit status {child.returncode}:\n{tail}")


def main(argv: list[str]) -> int:
    """``main([KERNEL, CASE, DEVICE])``: :func:`check_fresh_process`'s child, in a new process.
    Prints a failure's message as its last line of output, and exits 1 (3: not applicable)."""
    name, line, device_name = argv
    device = torch.device(device_name)
    from properties import kernels
    from properties.side_effects import check_inputs_unchanged
    from properties.varlen import check_varlen_inputs_unchanged
    from properties.varlen_case import VarlenCase, parse_case

    case = parse_case(line)
    before = process_settings(device)
    try:
        kernel = kernels.load_kernel(name)
        assert_settings_unchanged(before, process_settings(device), f"importing the kernel module {name}",
                                  "before its first call")
        check = check_varlen_inputs_unchanged if isinstance(case, VarlenCase) else check_inputs_unchanged
        check(kernel, case, device=device)
    except NotApplicable as reason:
        print(str(reason).replace("\n", " "))
        return _NOT_APPLICABLE
    except AssertionError as failure:
        print(str(failure).replace("\n", " "))
        return 1
    return 0

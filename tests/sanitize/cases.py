"""What the memory-safety gate runs, and ``python -m tests.sanitize.cases``, the process that runs it.

``python -m tests.sanitize`` starts this module under compute-sanitizer. For every case it runs the
kernel module's forward (``attention_with_lse`` if it has one, else ``attention``) and its backward
(the gradients of ``o`` for an upstream gradient ``do``), then waits for the GPU; nothing is
checked here, a memory checker watches. The cases, in order:

- ``corpus``: every distinct case of the regression corpus (``fuzz/corpus.txt``);
- ``edge``: :data:`EDGE_CASES`, small cases whose every tensor is an exactly-sized buffer (no view
  into a larger one) of a size that is not a multiple of 64 elements, so that a read or write past
  the end of any of them lands outside every allocation, where memcheck sees it;
- ``fuzz``: ``--sample N`` cases drawn by :func:`sample_cases` from a seeded ``random.Random``
  (the same seed gives the same cases on any machine) over the fuzzer's building blocks: lengths
  at the 64-wide tile edges, ``n_q != n_k``, odd head dims, every layout, causal or not, every dtype.

Before each case it prints ``CASE i/n SOURCE Case(...)`` and, when the case is done, ``  ok`` with
its time, so an error in the sanitizer's output follows the line of the case that caused it.
``--list`` prints the case lines and exits (no GPU needed); ``--shard I/N`` runs every N-th case,
which is how the driver compiles the kernels in parallel before the sanitized run.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
import traceback
from dataclasses import dataclass

from fuzz.strategies import BLOCK, SIZES
from properties.case import LAYOUTS, Case
from properties.kernels import features
from properties.varlen_case import VarlenCase

__all__ = [
    "EDGE_CASES",
    "Labelled",
    "all_cases",
    "corpus_cases",
    "main",
    "run_case",
    "sample_cases",
]

HEAD_DIMS = (16, 32, 64, 128, 256, 1, 2, 4, 8, 24, 40, 59, 80, 96, 111, 3, 127, 200)
"""The head dims :func:`fuzz.strategies.head_dims` lists: powers of two and odd sizes that need
padding (the sample also draws any ``1..256``)."""

LEADING = ((), (1,), (2,), (3,), (2, 3), (3, 1), (1, 2, 2))
"""Leading (batch, heads) dims: none, one or several, some of size 1."""

MAX_LEN = 300
"""The largest free length drawn; tile edges go up to 1025 now and then."""

MAX_WORK = 2 * 1025 * 1025
"""A cap on ``prod(leading) * n_q * n_k``: memcheck slows kernels 10-100x."""

EDGE_CASES = (
    Case(n_q=65, n_k=63, head_dim=59, leading=(), dtype="float16", layout="contiguous"),
    Case(n_q=1, n_k=129, head_dim=3, leading=(), dtype="float32", layout="contiguous"),
    Case(n_q=127, n_k=193, head_dim=111, leading=(3,), dtype="bfloat16", is_causal=True,
         layout="contiguous"),
    Case(n_q=129, n_k=65, head_dim=200, leading=(3,), dtype="float32", is_causal=True,
         layout="seq_first"),
    Case(n_q=63, n_k=255, head_dim=24, leading=(3, 1), dtype="float16", layout="heads_last"),
    Case(n_q=17, n_k=1, head_dim=40, leading=(2,), dtype="float32", layout="broadcast_kv"),
    Case(n_q=65, n_k=97, head_dim=255, leading=(), dtype="float32", layout="contiguous"),
    Case(n_q=130, n_k=70, head_dim=113, leading=(2,), dtype="float16", is_causal=True,
         layout="contiguous"),
    Case(n_q=1025, n_k=1023, head_dim=80, leading=(), dtype="bfloat16", layout="contiguous"),
    # Packed batches (flash.attention_varlen): the last sequence ends at the end of the buffer,
    # a sequence without queries sits between others, lengths straddle the 64-wide tiles.
    VarlenCase(seqlens_q=(65, 0, 63, 1), seqlens_k=(64, 17, 65, 3), heads=2, head_dim=40,
               dtype="float16", is_causal=True, layout="contiguous"),
    VarlenCase(seqlens_q=(1, 129, 7), seqlens_k=(130, 1, 63), heads=3, head_dim=72,
               dtype="bfloat16", is_causal=False, layout="contiguous"),
    VarlenCase(seqlens_q=(200, 1), seqlens_k=(199, 1), heads=1, head_dim=255, dtype="float32",
               is_causal=True, layout="heads_first"),
    # The contract's features: grouped heads (k, v tables indexed per query head, dk/dv summed
    # over a group), windows whose rows see no key, bottom-right with n_q > n_k (empty rows),
    # a window reaching past both ends, softcap, each next to tile edges.
    Case(n_q=129, n_k=65, head_dim=71, leading=(2, 4), dtype="float16", is_causal=True,
         layout="contiguous", kv_heads=1, causal_alignment="bottom_right"),
    Case(n_q=200, n_k=63, head_dim=41, leading=(6,), dtype="bfloat16", layout="heads_last",
         kv_heads=3, window=(0, 0)),
    Case(n_q=65, n_k=257, head_dim=127, leading=(2,), dtype="float32", is_causal=True,
         layout="contiguous", window=(300, -1), causal_alignment="bottom_right", softcap=5.0),
    Case(n_q=1023, n_k=1025, head_dim=63, leading=(4,), dtype="bfloat16", layout="seq_first",
         kv_heads=2, window=(127, 64), softmax_scale=0.3),
    VarlenCase(seqlens_q=(65, 0, 130, 1), seqlens_k=(64, 17, 63, 3), heads=4, head_dim=41,
               dtype="float16", is_causal=True, layout="contiguous", kv_heads=2,
               causal_alignment="bottom_right"),
    VarlenCase(seqlens_q=(129, 7), seqlens_k=(1, 200), heads=2, head_dim=95, dtype="bfloat16",
               is_causal=False, layout="contiguous", kv_heads=1, window=(3, 5), softcap=2.0),
    # k and v read through tensor descriptors (16-bit, d padded to 128, aligned rows): grouped heads,
    # bottom-right rows that see no key, a window; the descriptors' bounds, not masks, stop the reads.
    Case(n_q=193, n_k=129, head_dim=88, leading=(3,), dtype="float16", is_causal=True,
         layout="contiguous", kv_heads=1, window=(5, 0), causal_alignment="bottom_right"),
    # Decoding, which flash computes by its split-KV path (partials indexed by split and slot,
    # a group's rows of several heads in one tile, the merge): one row and three over odd
    # lengths of keys, grouped heads, a window that leaves rows empty in some splits; packed, one-row
    # sequences that split beside one that does not and one without queries.
    Case(n_q=1, n_k=1537, head_dim=111, leading=(2, 4), dtype="float16", layout="contiguous",
         kv_heads=2),
    Case(n_q=3, n_k=2049, head_dim=200, leading=(3,), dtype="float32", is_causal=True,
         layout="heads_last", window=(700, 0), causal_alignment="bottom_right"),
    VarlenCase(seqlens_q=(1, 0, 5, 1), seqlens_k=(1025, 3, 60, 2001), heads=4, head_dim=72,
               dtype="bfloat16", is_causal=True, layout="contiguous", kv_heads=1,
               causal_alignment="bottom_right"),
)
"""Cases whose q, k, v, do (and so o, lse, dq, dk, dv) are each one exactly-sized buffer with a
number of elements that is not a multiple of 64 (``contiguous``, ``seq_first`` and ``heads_last``
copy into a buffer of their own; ``broadcast_kv`` expands a one-slice buffer). Lengths sit next to
tile edges, head dims need padding, and the tile configurations differ: float32 with ``d`` padded to
256 (32-wide key tiles, one stage), ``d`` padded to 128 and to 64, the smallest ``d``."""


@dataclass(frozen=True)
class Labelled:
    """A case and where it comes from: ``corpus``, ``edge`` or ``fuzz``."""

    source: str
    case: Case


def corpus_cases() -> list[Case | VarlenCase]:
    """Every distinct case of the regression corpus, in file order (an entry pinned for several
    checks is one case here: the same line builds the same tensors)."""
    from fuzz import corpus

    seen: list[Case] = []
    for entry in corpus.read():
        if entry.case not in seen:
            seen.append(entry.case)
    return seen


def _length(rng: random.Random) -> int:
    """Mostly a tile edge ``m * 64 + (-1, 0, 1)`` up to 257, else any length up to
    :data:`MAX_LEN`, now and then a tile edge up to 1025."""
    r = rng.random()
    if r < 0.6:
        return max(1, rng.randint(0, 4) * BLOCK + rng.choice((-1, 0, 1)))
    if r < 0.9:
        return rng.randint(1, MAX_LEN)
    return rng.randint(5, 16) * BLOCK + rng.choice((-1, 0, 1))


def _fit_leading(leading: tuple[int, ...], n_q: int, n_k: int) -> tuple[int, ...]:
    lead = list(leading)
    while lead and math.prod(lead) * n_q * n_k > MAX_WORK:
        lead.pop()
    return tuple(lead)


def sample_cases(n: int, *, seed: int = 0, size: str = "gpu") -> list[Case]:
    """``n`` cases drawn from ``random.Random(seed)``: the same arguments give the same cases.

    Half draw ``n_k`` apart from ``n_q``; head dims come from :data:`HEAD_DIMS` (one in four any ``1..256``);
    layouts, causality and dtypes (those of :data:`fuzz.strategies.SIZES` ``[size]``: bfloat16 only
    for ``gpu``) are uniform. Values are standard normal: they do not change which addresses the
    kernel touches.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    dtypes = SIZES[size].dtypes
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        n_q = _length(rng)
        n_k = _length(rng) if rng.random() < 0.5 else n_q
        head_dim = rng.choice(HEAD_DIMS) if rng.random() < 0.75 else rng.randint(1, 256)
        leading = _fit_leading(rng.choice(LEADING), n_q, n_k)
        cases.append(Case(
            n_q=n_q, n_k=n_k, head_dim=head_dim, leading=leading,
            dtype=rng.choice(dtypes), is_causal=rng.random() < 0.5,
            layout=rng.choice(LAYOUTS), distribution="normal", scale=1.0,
            seed=rng.randint(0, 2**16),
        ))
    return cases


def all_cases(*, sample: int, seed: int = 0, size: str = "gpu", corpus: bool = True,
              edge: bool = True) -> list[Labelled]:
    """The gate's cases in the order they run: corpus, edge cases, then the fuzz sample."""
    out = [Labelled("corpus", c) for c in (corpus_cases() if corpus else [])]
    out += [Labelled("edge", c) for c in (EDGE_CASES if edge else ())]
    out += [Labelled("fuzz", c) for c in sample_cases(sample, seed=seed, size=size)]
    return out


def run_case(kernel, case: Case | VarlenCase, device) -> None:
    """The kernel's forward and backward on ``case`` (outputs discarded), then wait for the device.

    A :class:`VarlenCase` goes through the module's ``attention_varlen`` (skipped, with nothing
    run, for a module without one)."""
    import torch

    if isinstance(case, VarlenCase):
        _run_varlen_case(kernel, case, device)
        return
    if case.needs() - features(kernel):
        return  # a feature the module does not declare: nothing to run
    q, k, v = case.make_qkv(device)
    do = case.make_grad_out(device)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with_lse = getattr(kernel, "attention_with_lse", None)
    if with_lse is not None:
        o = with_lse(*leaves, case.is_causal, **case.features())[0]
    else:
        o = kernel.attention(*leaves, case.is_causal, **case.features())
    torch.autograd.grad(o, leaves, do)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _run_varlen_case(kernel, case: VarlenCase, device) -> None:
    import torch

    fn = getattr(kernel, "attention_varlen", None)
    if fn is None or case.needs() - features(kernel):
        return
    inputs = case.make_qkv(device)
    do = case.make_grad_out(device)
    leaves = [t.detach().requires_grad_() for t in (inputs.q, inputs.k, inputs.v)]
    o = fn(*leaves, inputs.cu_seqlens_q, inputs.cu_seqlens_k, inputs.max_seqlen_q,
           inputs.max_seqlen_k, case.is_causal, **case.features())
    torch.autograd.grad(o, leaves, do)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def case_line(i: int, n: int, labelled: Labelled) -> str:
    """The line printed before case ``i`` (1-based) of ``n``; the driver parses it back."""
    return f"CASE {i}/{n} {labelled.source} {labelled.case}"


DONE = "SANITIZE-CASES done"
"""The start of the last line of a run that got through every case it was given."""


def add_case_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the cases (kernel, sample, seed, size, corpus, edge), shared by this
    child and the driver (``python -m tests.sanitize``), which passes them on."""
    parser.add_argument("--kernel", default="flash", help="kernel module (default flash)")
    parser.add_argument("--sample", type=int, default=16, help="fuzz cases to draw (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fuzz sample (default 0)")
    parser.add_argument("--size", choices=sorted(SIZES), default="gpu",
                        help="the fuzz sample's dtypes, as fuzz.strategies.SIZES: gpu adds bfloat16 "
                             "(default gpu)")
    parser.add_argument("--no-corpus", action="store_true", help="leave out the regression corpus")
    parser.add_argument("--no-edge", action="store_true", help="leave out the exactly-sized edge cases")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.sanitize.cases",
        description="Run a kernel module's forward and backward on the memory-safety gate's cases "
                    "(normally started by `python -m tests.sanitize`, under compute-sanitizer).")
    add_case_arguments(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="run only cases i with i %% N == I (0-based; default all)")
    parser.add_argument("--list", action="store_true", help="print the case lines and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
        if not 0 <= shard < shards:
            raise ValueError
    except ValueError:
        print(f"--shard must be I/N with 0 <= I < N, got {args.shard!r}", file=sys.stderr)
        return 2
    cases = all_cases(sample=args.sample, seed=args.seed, size=args.size,
                      corpus=not args.no_corpus, edge=not args.no_edge)
    n = len(cases)
    mine = [(i, c) for i, c in enumerate(cases, 1) if (i - 1) % shards == shard]
    if args.list:
        for i, labelled in mine:
            print(case_line(i, n, labelled))
        return 0

    import torch

    if not torch.cuda.is_available():
        print("python -m tests.sanitize.cases: no CUDA device (torch.cuda.is_available() is False); "
              "these cases are for compute-sanitizer, which checks GPU kernels", file=sys.stderr)
        return 2
    # Start CUDA now: compute-sanitizer attaches when the process starts CUDA, and waits for that
    # only --launch-timeout seconds.
    torch.cuda.init()

    from properties.kernels import load_kernel

    kernel = load_kernel(args.kernel)
    start = time.perf_counter()
    for i, labelled in mine:
        _say(case_line(i, n, labelled))
        t0 = time.perf_counter()
        try:
            run_case(kernel, labelled.case, "cuda")
        except Exception:  # noqa: BLE001 - any failure ends the run: the CUDA context may be lost
            traceback.print_exc()
            sys.stderr.flush()
            _say(f"FAILED {case_line(i, n, labelled)}")
            return 1
        _say(f"  ok {time.perf_counter() - t0:.2f} s")
        time.sleep(0.05)  # lets the sanitizer print this case's errors before the next case line
    _say(f"{DONE}: {len(mine)} of {n} cases in {time.perf_counter() - start:.1f} s")
    return 0


def _say(line: str) -> None:
    """One line in one write: the sanitizer writes to the same stream, and must not split it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

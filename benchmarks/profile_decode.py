"""Where a decode call's time goes, on a GPU: each kernel's GPU time, the host's time per call.

Run from the repository root::

    PYTHONPATH=. python3 benchmarks/profile_decode.py [--n-k 4096 16384 32768] [--cprofile]

The shape is ``benchmarks/bench_decode.py``'s (one query row per head, b = 8, h_q = 32, h_kv = 8,
d = 128, bfloat16). For each ``n_k`` it prints the GPU time of each kernel ``flash.attention``
launched (``torch.profiler``, 20 calls), the host's time per call (200 calls without a sync: when
it exceeds the kernels' time, the GPU waits for Python), ``triton.testing.do_bench`` of the call
as ``bench_decode.py`` times it, and of a CUDA graph of the call (no host work per call: what a
decode loop captured in a graph gets). ``--cprofile`` adds the 25 most expensive functions of 500
calls at the first ``n_k``. It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch
import triton.testing
from torch.profiler import ProfilerActivity, profile

import flash


def tbps(n_bytes: int, ms: float) -> str:
    return f"{n_bytes / (ms * 1e-3) / 1e12:.2f} TB/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-k", type=int, nargs="+", default=[4096, 16384, 32768])
    parser.add_argument("--cprofile", action="store_true")
    args = parser.parse_args()
    b, hq, hkv, d = 8, 32, 8, 128
    print(f"decode: b={b}, h_q={hq}, h_kv={hkv}, d={d}, n_q=1, bfloat16, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, triton {triton.__version__}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for n_k in args.n_k:
        q = torch.randn((b, hq, 1, d), generator=gen, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn((b, hkv, n_k, d), generator=gen, device="cuda", dtype=torch.bfloat16)
                for _ in "kv")
        n_bytes = 2 * k.numel() * k.element_size()

        def call(q=q, k=k, v=v):
            return flash.attention(q, k, v)

        for _ in range(10):
            call()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            call()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(f"n_k={n_k}: host {1e6 * (t1 - t0) / 200:.1f} us/call")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                call()
            torch.cuda.synchronize()
        gpu_us = 0.0
        for e in prof.key_averages():
            if e.device_time_total > 0:
                gpu_us += e.device_time_total / 20
                print(f"   {e.key[:50]:50s} {e.count:4d} x {e.device_time_total / e.count:8.1f} us")
        print(f"   kernels {gpu_us:.1f} us a call -> {tbps(n_bytes, gpu_us / 1e3)}")
        ms = triton.testing.do_bench(call)
        print(f"   do_bench {1e3 * ms:.1f} us -> {tbps(n_bytes, ms)}")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()  # warm up outside the capture (allocations, the plan cache)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        ms = triton.testing.do_bench(graph.replay)
        print(f"   CUDA graph replay {1e3 * ms:.1f} us -> {tbps(n_bytes, ms)}")
        if args.cprofile and n_k == args.n_k[0]:
            prof_host = cProfile.Profile()
            prof_host.enable()
            for _ in range(500):
                call()
            prof_host.disable()
            torch.cuda.synchronize()
            pstats.Stats(prof_host).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()

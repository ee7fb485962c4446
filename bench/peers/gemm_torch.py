#!/usr/bin/env python3
"""PyTorch CPU peer for bench_gemm (informational): relu(X @ W + b), X [M, K], W [K, N].

usage: gemm_torch.py M K N THREADS REPS
Prints: "torch gemm MxKxN: median_ms=... threads=... blas=..." (measured).
"""
import re
import statistics
import sys
import time

import torch


def main():
    m, k, n, threads, reps = (int(v) for v in sys.argv[1:6])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(m, k, generator=g) - 0.5
    w = torch.rand(k, n, generator=g) - 0.5
    b = torch.rand(n, generator=g) - 0.5
    out = torch.empty(m, n)
    torch.relu_(torch.addmm(b, x, w, out=out))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.relu_(torch.addmm(b, x, w, out=out))
        times.append((time.perf_counter() - t0) * 1e3)
    info = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    blas = info.group(1) if info else "unknown"
    print(f"torch gemm {m}x{k}x{n}: median_ms={statistics.median(times):.2f} "
          f"min_ms={min(times):.2f} threads={torch.get_num_threads()} blas={blas}")


if __name__ == "__main__":
    main()

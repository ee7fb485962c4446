#!/usr/bin/env python3
"""PyTorch CPU peer for bench_spmm: torch.mm(A_csr, X) on exactly the matrices bench_spmm dumped.

usage: spmm_torch.py DUMP_DIR NAME THREADS REPS
Prints one line: "torch spmm NAME: median_ms=... min_ms=... threads=... nnz=..." (measured).
"""
import statistics
import sys
import time

import numpy as np
import torch


def main():
    dump_dir, name, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    rows, cols, nnz, feats = (int(v) for v in open(f"{dump_dir}/{name}_meta.txt").read().split())
    indptr = torch.from_numpy(np.fromfile(f"{dump_dir}/{name}_indptr.i32", dtype=np.int32))
    indices = torch.from_numpy(np.fromfile(f"{dump_dir}/{name}_indices.i32", dtype=np.int32))
    values = torch.from_numpy(np.fromfile(f"{dump_dir}/{name}_values.f32", dtype=np.float32))
    assert indices.numel() == nnz and indptr.numel() == rows + 1
    a = torch.sparse_csr_tensor(indptr, indices, values, size=(rows, cols))
    x = torch.rand(cols, feats, generator=torch.Generator().manual_seed(2))
    y = torch.mm(a, x)  # warm-up (and the layout check below)
    ref = torch.zeros(rows, feats)
    sample = torch.arange(0, rows, max(1, rows // 50))
    for r in sample.tolist():  # spot-check a few rows so a wrong peer cannot look fast
        lo, hi = int(indptr[r]), int(indptr[r + 1])
        ref[r] = (values[lo:hi, None] * x[indices[lo:hi].long()]).sum(0)
    err = (y[sample] - ref[sample]).abs().max().item()
    assert err < 1e-3, f"torch result check failed: max err {err}"
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, x)
        times.append((time.perf_counter() - t0) * 1e3)
    print(f"torch spmm {name}: median_ms={statistics.median(times):.2f} min_ms={min(times):.2f} "
          f"threads={torch.get_num_threads()} nnz={nnz} torch={torch.__version__}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch CPU peer for bench_model_inference on a transformer encoder: torch.nn.TransformerEncoder of
nn.TransformerEncoderLayer(batch_first=True, dropout=0) with the sliding window as a float band mask
(-inf where |i - j| > window / 2), the way a PyTorch user restricts attention to a band. Writes the
model as a repository entry (REPO/NAME/config.yaml, model.safetensors) and the token embeddings as
REPO/x.npy, so dype serves exactly these weights; times PyTorch's forward (measured) and writes its
output as REPO/NAME.torch.npy.

usage: transformer_torch.py REPO NAME D_MODEL HEADS FFN LAYERS SEQ WINDOW NORM_FIRST(0|1) THREADS REPS
"""
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "scripts"))
from pyg_reference import write_safetensors  # noqa: E402
from transformer_reference import band_mask  # noqa: E402


def main():
    repo, name = sys.argv[1:3]
    d, heads, ffn, layers, seq, window, norm_first, threads, reps = map(int, sys.argv[3:12])
    torch.set_num_threads(threads)
    torch.manual_seed(7)
    layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, batch_first=True, norm_first=bool(norm_first))
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    os.makedirs(os.path.join(repo, name), exist_ok=True)
    write_safetensors(os.path.join(repo, name, "model.safetensors"), dict(model.state_dict()), "F32")
    with open(os.path.join(repo, name, "config.yaml"), "w") as f:
        f.write(f"family: transformer\nd_model: {d}\nheads: {heads}\nffn: {ffn}\nlayers: {layers}\n"
                f"window: {window}\nnorm_first: {'true' if norm_first else 'false'}\n")
    x = torch.randn(1, seq, d, generator=torch.Generator().manual_seed(8))
    np.save(os.path.join(repo, "x.npy"), x[0].numpy())
    mask = band_mask(seq, window)
    with torch.no_grad():
        y = model(x, mask=mask)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            model(x, mask=mask)
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"torch transformer band-mask: median_ms={statistics.median(times):.1f} min_ms={min(times):.1f} "
          f"threads={torch.get_num_threads()} seq_len={seq} window={window} torch={torch.__version__}")
    np.save(os.path.join(repo, name + ".torch.npy"), y[0].numpy())
    # Context for the ratio: how fast this PyTorch multiplies the FFN's matrices, next to the same
    # product through numpy (OpenBLAS when libopenblas0 is installed) in this process.
    a, b = torch.randn(seq, d), torch.randn(d, ffn)
    rates = {}
    for way, f in (("torch", lambda: a @ b), ("numpy", lambda: a.numpy() @ b.numpy())):
        f()
        t0 = time.perf_counter()
        for _ in range(3):
            f()
        rates[way] = 2.0 * seq * d * ffn * 3 / (time.perf_counter() - t0) / 1e9
    print(f"  peer context: [{seq} x {d}] x [{d} x {ffn}] sgemm {rates['torch']:.0f} GFLOP/s in torch, "
          f"{rates['numpy']:.0f} GFLOP/s through numpy's BLAS (measured)")


if __name__ == "__main__":
    main()

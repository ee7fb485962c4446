#!/usr/bin/env python3
"""PyTorch peers for dype's CPU sliding-window attention (all figures measured on this CPU).

Reads the inputs and dype's output that `bench_attention --peer-data=DIR` wrote (raw FP32
[seq_len, heads*head_dim] q/k/v/out plus dype.json with dype's timings), runs two PyTorch
implementations of the same attention on the same inputs, checks their outputs against dype's
(max abs diff), and prints the speed ratios with PASS/FAIL against the targets, each also as one
machine-readable "RESULT name=.. value=.. unit=.. kind=.. better=.. peer=.. target=.." line.

Peers:
  chunked  Longformer's sliding-chunks attention (Beltagy et al. 2020, longformer/sliding_chunks.py,
           the same algorithm as HF LongformerSelfAttention._sliding_chunks_query_key_matmul /
           _sliding_chunks_matmul_attn_probs_value): q and k cut with `unfold` into overlapping
           chunks of size w (= 2 * one-sided reach) with step w/2, one batched matmul per chunk
           pair, diagonals skewed into a [seq_len, w+1] band, invalid corners masked with -inf,
           softmax, then the skewed probabilities times 3w/2-row value chunks.
  dense    full Q K^T [heads, seq_len, seq_len], band mask |i-j| > w/2 -> -inf, softmax, @ V.
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the run script turns this into a non-zero exit
    print(f"attention_torch.py: peer missing: {e}", file=sys.stderr)
    sys.exit(3)


# ---- Longformer sliding chunks (one-sided reach `h` = w/2; chunk size 2h = w, overlap h) ------

def _chunk(x, h):
    """[B, L, D] -> [B, L/h - 1, 2h, D]: overlapping chunks of size 2h with step h (unfold)."""
    return x.unfold(1, 2 * h, h).transpose(-1, -2)


def _skew(x, direction, padding_value):
    """Converts diagonals into columns (Longformer's _skew)."""
    x_padded = F.pad(x, direction, value=padding_value)
    return x_padded.view(*x_padded.size()[:-2], x_padded.size(-1), x_padded.size(-2))


def _skew2(x, padding_value):
    """Shifts every row of [B, C, M, L] one further right (Longformer's _skew2)."""
    b, c, m, l = x.size()
    x = F.pad(x, (0, m + 1), value=padding_value)
    x = x.view(b, c, -1)
    x = x[:, :, :-m]
    x = x.view(b, c, m, m + l)
    return x[:, :, :, :-1]


def _mask_invalid_locations(band, h):
    """-inf where the band [B, L, 2h+1] points before the first or past the last token."""
    seq_len = band.size(1)
    rows = torch.arange(h).unsqueeze(1)
    cols = torch.arange(h + 1).unsqueeze(0)
    begin = cols < (h - rows)  # row i, column c sees key i - h + c: invalid when < 0
    band[:, :h, : h + 1].masked_fill_(begin.unsqueeze(0), -float("inf"))
    end = begin.flip(dims=(0, 1))
    band[:, seq_len - h:, -(h + 1):].masked_fill_(end.unsqueeze(0), -float("inf"))


def sliding_chunks_matmul_qk(q, k, h, padding_value):
    """q, k: [B, L, D] -> band scores [B, L, 2h+1] (column h = the diagonal)."""
    bh, seq_len, _ = q.size()
    assert seq_len % (2 * h) == 0, "Longformer sliding chunks need seq_len % w == 0"
    chunks_count = seq_len // h - 1
    chunk_q = _chunk(q, h)
    chunk_k = _chunk(k, h)
    chunk_attn = torch.einsum("bcxd,bcyd->bcxy", (chunk_q, chunk_k))
    diagonal_chunk_attn = _skew(chunk_attn, direction=(0, 0, 0, 1), padding_value=padding_value)
    diagonal_attn = diagonal_chunk_attn.new_empty((bh, chunks_count + 1, h, 2 * h + 1))
    diagonal_attn[:, :-1, :, h:] = diagonal_chunk_attn[:, :, :h, : h + 1]
    diagonal_attn[:, -1, :, h:] = diagonal_chunk_attn[:, -1, h:, : h + 1]
    diagonal_attn[:, 1:, :, :h] = diagonal_chunk_attn[:, :, -(h + 1):-1, h + 1:]
    diagonal_attn[:, 0, 1:h, 1:h] = diagonal_chunk_attn[:, 0, : h - 1, 1 - h:]
    band = diagonal_attn.view(bh, seq_len, 2 * h + 1)
    _mask_invalid_locations(band, h)
    return band


def sliding_chunks_matmul_pv(prob, v, h):
    """prob: [B, L, 2h+1], v: [B, L, D] -> [B, L, D]."""
    bh, seq_len, head_dim = v.size()
    chunks_count = seq_len // h - 1
    chunk_prob = prob.reshape(bh, seq_len // h, h, 2 * h + 1)
    padded_v = F.pad(v, (0, 0, h, h), value=-1)
    # value chunks of 3h rows with step h (unfold), as Longformer's as_strided view
    chunk_v = padded_v.unfold(1, 3 * h, h).transpose(-1, -2)
    assert chunk_v.size(1) == chunks_count + 1
    skewed_prob = _skew2(chunk_prob, padding_value=0)
    return torch.einsum("bcwd,bcdh->bcwh", (skewed_prob, chunk_v)).reshape(bh, seq_len, head_dim)


def chunked_attention(q, k, v, window):
    """q, k, v: [heads, L, D] -> [heads, L, D]."""
    h = window // 2
    q = q * (1.0 / math.sqrt(q.size(-1)))
    scores = sliding_chunks_matmul_qk(q, k, h, padding_value=0)
    probs = torch.softmax(scores, dim=-1)
    return sliding_chunks_matmul_pv(probs, v, h)


def dense_attention(q, k, v, window, band_mask):
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.size(-1)))
    scores.masked_fill_(band_mask, -float("inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def timed(fn, reps):
    """Median wall time and median process CPU time (all threads) per call."""
    out = fn()  # warm-up
    times, cpu_times = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    return out, sorted(times)[len(times) // 2], sorted(cpu_times)[len(cpu_times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="directory written by bench_attention --peer-data")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--peers", default="chunked,dense")
    ap.add_argument("--chunked-target", type=float, default=4.0)
    ap.add_argument("--dense-target", type=float, default=20.0)
    ap.add_argument("--tolerance", type=float, default=1e-4, help="max abs diff accepted")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    with open(os.path.join(args.data, "dype.json")) as f:
        meta = json.load(f)
    L, H, D, w = meta["seq_len"], meta["heads"], meta["head_dim"], meta["window"]

    def load(name):
        a = np.fromfile(os.path.join(args.data, name + ".f32"), dtype=np.float32)
        assert a.size == L * H * D, f"{name}.f32 has {a.size} floats, expected {L * H * D}"
        # [L, H*D] -> [H, L, D], contiguous as the peers would hold them
        return torch.from_numpy(a.reshape(L, H, D)).permute(1, 0, 2).contiguous()

    q, k, v, ours = (load(n) for n in ("q", "k", "v", "out"))
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} (dype threads={meta['threads']}, "
          f"isa={meta['isa']}); seq_len={L} window={w} head_dim={D} heads={H}")
    print(f"dype median: {meta['median_s'] * 1e3:.2f} ms wall, {meta['cpu_median_s'] * 1e3:.2f} ms CPU "
          f"(measured)")
    print(f"RESULT name=seq{L}_ms value={meta['median_s'] * 1e3:.6g} unit=ms kind=absolute better=lower peer=- target=-")

    ok = True
    targets = {"chunked": args.chunked_target, "dense": args.dense_target}
    for peer in [p for p in args.peers.split(",") if p]:
        with torch.no_grad():
            if peer == "chunked":
                out, t, ct = timed(lambda: chunked_attention(q, k, v, w), args.reps)
            elif peer == "dense":
                idx = torch.arange(L)
                band_mask = (idx[:, None] - idx[None, :]).abs() > w // 2
                out, t, ct = timed(lambda: dense_attention(q, k, v, w, band_mask), args.reps)
            else:
                print(f"unknown peer '{peer}'", file=sys.stderr)
                return 2
        diff = (out - ours).abs().max().item()
        ratio = t / meta["median_s"]
        match = diff <= args.tolerance
        passed = match and ratio >= targets[peer]
        ok = ok and passed
        print(f"torch {peer}: median {t * 1e3:.1f} ms wall, {ct * 1e3:.1f} ms CPU (measured), "
              f"max abs diff vs dype {diff:.2e} ({'match' if match else 'MISMATCH'})")
        # CPU-time ratio: informative on a shared machine, where wall time includes waiting.
        print(f"  (CPU-time ratio dype vs torch {peer}: {ct / meta['cpu_median_s']:.2f}x)")
        print(f"ratio dype vs torch {peer} (seq_len={L}): {ratio:.2f}x (target >= {targets[peer]:g}x) "
              f"{'PASS' if passed else 'FAIL'}")
        # Machine-readable (bench/run_all.sh collects these lines).
        print(f"RESULT name=seq{L}_vs_torch_{peer} value={ratio:.6g} unit=x kind=ratio better=higher "
              f"peer=torch-{peer} target={targets[peer]:g}")
        print(f"RESULT name=seq{L}_max_abs_diff_vs_torch_{peer} value={diff:.3g} unit=abs kind=absolute "
              f"better=lower peer=torch-{peer} target={args.tolerance:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch CPU peer for bench_model_inference: the same trained-layout GNN, full-graph inference.

Builds a GCN, GIN or GraphSAGE (PyG's layers, tests/scripts/pyg_reference.py) with seeded weights, writes it as
a model repository entry (REPO/NAME/config.yaml, model.safetensors) and the features as REPO/x.npy,
so dype serves exactly these weights, then times PyTorch's forward on the graph two ways:
  gather  - PyG's own message passing for an edge_index: index_select the sources, scale, index_add
            into the targets (what GCNConv/GINConv run on CPU without torch_sparse);
  csr     - the same layers with the aggregation as one torch.sparse CSR matmul (torch's fastest).
Graph normalisation is done once, outside the timing (PyG's cached=True), as dype does it at
registration. Prints one line per way (measured) and writes REPO/NAME.torch.npy, the output.

usage: gnn_torch.py GRAPH.mtx FAMILY REPO NAME FEATURES HIDDEN CLASSES LAYERS THREADS REPS
"""
import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "scripts"))
from pyg_reference import GNN, write_safetensors  # noqa: E402


def read_mtx(path):
    with open(path) as f:
        header = f.readline().split()
        symmetric = "symmetric" in header
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        n, _, _ = (int(v) for v in line.split())
        e = np.loadtxt(f, dtype=np.int64, usecols=(0, 1), ndmin=2) - 1
    src, dst = e[:, 0], e[:, 1]
    if symmetric:
        off = src != dst
        src, dst = np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]])
    return n, torch.from_numpy(src), torch.from_numpy(dst)


def main():
    (graph, family, repo, name, feats, hidden, classes, layers, threads, reps) = sys.argv[1:11]
    feats, hidden, classes, layers, threads, reps = map(int, (feats, hidden, classes, layers, threads, reps))
    torch.set_num_threads(threads)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    n, src, dst = read_mtx(graph)
    torch.manual_seed(5)
    args = type("A", (), dict(family=family, inp=feats, hidden=hidden, out=classes, layers=layers, eps=0.0,
                              batch_norm=False))
    model = GNN(args).eval()
    os.makedirs(os.path.join(repo, name), exist_ok=True)
    write_safetensors(os.path.join(repo, name, "model.safetensors"),
                      {k: v for k, v in model.state_dict().items() if v.is_floating_point()}, "F32")
    with open(os.path.join(repo, name, "config.yaml"), "w") as f:
        f.write(f"family: {family}\nin_features: {feats}\nhidden: {hidden}\nout_features: {classes}\nlayers: {layers}\n")
    x = torch.randn(n, feats, generator=torch.Generator().manual_seed(6))
    np.save(os.path.join(repo, "x.npy"), x.numpy())

    # Aggregation operands, prepared once: (s, d, w) with GCN's normalisation and self loops, or
    # GIN's plain edges; and the same as a CSR matrix A with A[d, s] = w.
    if family == "sage":
        # Mean over incoming edges: each edge weighted 1 / in-degree of its target.
        d, s = dst, src
        count = torch.zeros(n).index_add_(0, d, torch.ones(d.numel()))
        w = 1.0 / count.clamp(min=1)[d]
    elif family == "gcn":
        loop = src == dst
        loop_w = torch.ones(n)
        ar = torch.arange(n)
        s = torch.cat([src[~loop], ar])
        d = torch.cat([dst[~loop], ar])
        w = torch.cat([torch.ones(int((~loop).sum())), loop_w])
        deg = torch.zeros(n).scatter_add_(0, d, w)
        dis = deg.pow(-0.5)
        w = dis[s] * w * dis[d]
    else:
        s, d, w = src, dst, torch.ones(src.numel())
    a = torch.sparse_coo_tensor(torch.stack([d, s]), w, (n, n)).coalesce().to_sparse_csr()

    def aggregate_gather(h):
        return torch.zeros_like(h).index_add_(0, d, h.index_select(0, s) * w[:, None])

    def aggregate_csr(h):
        return torch.mm(a, h)

    def forward(h, aggregate):
        for i, conv in enumerate(model.convs):
            if family == "gcn":
                h = aggregate(conv.lin(h)) + conv.bias
            elif family == "sage":
                h = conv.lin_l(aggregate(h)) + conv.lin_r(h)
            else:
                h = conv.nn((1 + conv.eps) * h + aggregate(h))
            if i + 1 < len(model.convs):
                h = torch.relu(h)
        return h

    with torch.no_grad():
        ref = model(x, src, dst)  # the layer definitions themselves, once, as the check
        for way, agg in (("gather", aggregate_gather), ("csr", aggregate_csr)):
            y = forward(x, agg)
            err = ((y - ref).abs().max() / ref.abs().max()).item()
            assert err < 1e-4, f"{way} peer disagrees with the layers: {err}"
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                forward(x, agg)
                times.append((time.perf_counter() - t0) * 1e3)
            print(f"torch {family} {way}: median_ms={statistics.median(times):.1f} min_ms={min(times):.1f} "
                  f"threads={torch.get_num_threads()} nodes={n} edges={src.numel()} torch={torch.__version__}")
        np.save(os.path.join(repo, name + ".torch.npy"), ref.numpy())


if __name__ == "__main__":
    main()

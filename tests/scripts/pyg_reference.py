#!/usr/bin/env python3
"""PyTorch references for dype's served GNNs, written the way PyTorch Geometric defines them.

PyG itself is not packaged for Debian, so its layers are re-stated here in plain PyTorch, with the
state-dict names PyG's models write (models.GCN / GIN / GraphSAGE: convs.{i}.lin.weight, convs.{i}.bias,
convs.{i}.nn.lins.{j}.*, convs.{i}.nn.norms.0.*, convs.{i}.eps, convs.{i}.lin_l.*, convs.{i}.lin_r.weight):
  GCNConv   x' = D^-1/2 (A + I) D^-1/2 x W^T + b, self loops as add_remaining_self_loops (a node's
            loop edges give way to one loop carrying the last one's weight), degree at the target
  GINConv   x' = MLP((1 + eps) x_i + sum_{j -> i} x_j), MLP([in, out, out]) = Linear, [BatchNorm],
            ReLU, Linear (plain last)
  SAGEConv  x' = lin_l(mean_{j -> i} x_j) + lin_r(x_i), mean over incoming edges (0 without any),
            lin_r without bias
  BasicGNN  ReLU between layers, none after the last.
Writes a model repository entry (config.yaml, model.safetensors) and case.json: a random directed
graph (with duplicate and loop edges), features, and PyTorch's output for them.

  pyg_reference.py --family gcn --in 12 --hidden 16 --out 5 --layers 3 --dir /tmp/repo --name g
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
from torch import nn


class GCNConv(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        self.bias = nn.Parameter(torch.empty(o).uniform_(-0.5, 0.5))

    def forward(self, x, src, dst):
        n = x.size(0)
        w = torch.ones(src.numel(), dtype=x.dtype)
        loop = src == dst
        loop_w = torch.ones(n, dtype=x.dtype)
        loop_w[src[loop]] = w[loop]
        keep = ~loop
        ar = torch.arange(n)
        s = torch.cat([src[keep], ar])
        d = torch.cat([dst[keep], ar])
        w = torch.cat([w[keep], loop_w])
        deg = torch.zeros(n, dtype=x.dtype).scatter_add_(0, d, w)
        dis = deg.pow(-0.5)
        dis[torch.isinf(dis)] = 0
        norm = dis[s] * w * dis[d]
        h = self.lin(x)
        return torch.zeros(n, h.size(1), dtype=x.dtype).index_add_(0, d, norm[:, None] * h[s]) + self.bias


class SAGEConv(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin_l = nn.Linear(i, o)
        self.lin_r = nn.Linear(i, o, bias=False)

    def forward(self, x, src, dst):
        n = x.size(0)
        total = torch.zeros_like(x).index_add_(0, dst, x[src])
        count = torch.zeros(n, dtype=x.dtype).index_add_(0, dst, torch.ones(dst.numel(), dtype=x.dtype))
        mean = total / count.clamp(min=1)[:, None]
        return self.lin_l(mean) + self.lin_r(x)


class MLP(nn.Module):
    def __init__(self, i, o, batch_norm):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(i, o), nn.Linear(o, o)])
        self.norms = nn.ModuleList([nn.BatchNorm1d(o)]) if batch_norm else None

    def forward(self, x):
        x = self.lins[0](x)
        if self.norms is not None:
            x = self.norms[0](x)
        return self.lins[1](torch.relu(x))


class GINConv(nn.Module):
    def __init__(self, i, o, eps, batch_norm):
        super().__init__()
        self.nn = MLP(i, o, batch_norm)
        self.register_buffer("eps", torch.tensor([eps]))

    def forward(self, x, src, dst):
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        return self.nn((1 + self.eps) * x + agg)


class GNN(nn.Module):
    def __init__(self, a):
        super().__init__()
        widths = [a.inp] + [a.hidden] * (a.layers - 1) + [a.out]
        if a.family == "gcn":
            self.convs = nn.ModuleList([GCNConv(widths[i], widths[i + 1]) for i in range(a.layers)])
        elif a.family == "sage":
            self.convs = nn.ModuleList([SAGEConv(widths[i], widths[i + 1]) for i in range(a.layers)])
        else:
            self.convs = nn.ModuleList(
                [GINConv(widths[i], widths[i + 1], a.eps, a.batch_norm) for i in range(a.layers)])

    def forward(self, x, src, dst):
        for i, conv in enumerate(self.convs):
            x = conv(x, src, dst)
            if i + 1 < len(self.convs):
                x = torch.relu(x)
        return x


def to_dtype(t, dtype):
    """The tensor as stored: (safetensors dtype, raw bytes, the float32 values dype will read)."""
    f = t.detach().to(torch.float32).contiguous()
    if dtype == "F32":
        return "F32", f.numpy().tobytes(), f
    if dtype == "F16":
        h = f.to(torch.float16)
        return "F16", h.numpy().tobytes(), h.to(torch.float32)
    b = f.to(torch.bfloat16)
    raw = b.view(torch.int16).numpy().astype("<i2").tobytes()
    return "BF16", raw, b.to(torch.float32)


def write_safetensors(path, tensors, dtype):
    """tensors: name -> torch tensor. The documented layout: u64 header length, JSON header, data."""
    header, blobs, offset, stored = {}, [], 0, {}
    for name, t in tensors.items():
        dt, raw, back = to_dtype(t, dtype)
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
        stored[name] = back
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for raw in blobs:
            out.write(raw)
    return stored


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--family", choices=["gcn", "gin", "sage"], required=True)
    p.add_argument("--in", dest="inp", type=int, default=12)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--out", type=int, default=5)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--eps", type=float, default=0.0)
    p.add_argument("--batch-norm", action="store_true")
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--edges", type=int, default=300)
    p.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--graph", help="JSON with nodes, src, dst and x (row-major [nodes, in]): compute on this "
                                   "graph instead of a generated one (the weights are the seed's all the same)")
    p.add_argument("--dir", required=True, help="model repository folder")
    p.add_argument("--name", required=True, help="model name (folder)")
    a = p.parse_args()

    torch.manual_seed(a.seed)
    model = GNN(a)
    if a.batch_norm:  # inference statistics far from identity, so folding them is exercised
        for conv in model.convs:
            bn = conv.nn.norms[0]
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    model.eval()

    folder = os.path.join(a.dir, a.name)
    os.makedirs(folder, exist_ok=True)
    weights = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
    stored = write_safetensors(os.path.join(folder, "model.safetensors"), weights, a.dtype)
    model.load_state_dict({**model.state_dict(), **stored})  # compute with what dype reads

    cfg = [f"family: {a.family}", f"in_features: {a.inp}", f"hidden: {a.hidden}",
           f"out_features: {a.out}", f"layers: {a.layers}", "activation: relu"]
    if a.family == "gin":
        cfg += [f"eps: {a.eps}", f"batch_norm: {'true' if a.batch_norm else 'false'}"]
    with open(os.path.join(folder, "config.yaml"), "w") as out:
        out.write("\n".join(cfg) + "\n")

    g = torch.Generator().manual_seed(a.seed + 1000)
    src = torch.randint(0, a.nodes, (a.edges,), generator=g)
    dst = torch.randint(0, a.nodes, (a.edges,), generator=g)
    src = torch.cat([src, torch.tensor([1, 2, 2])])  # loop edges, one node twice
    dst = torch.cat([dst, torch.tensor([1, 2, 2])])
    x = torch.randn(a.nodes, a.inp, generator=g)
    if a.graph:
        with open(a.graph) as f:
            given = json.load(f)
        a.nodes = given["nodes"]
        src = torch.tensor(given["src"], dtype=torch.int64)
        dst = torch.tensor(given["dst"], dtype=torch.int64)
        x = torch.tensor(given["x"], dtype=torch.float32).reshape(a.nodes, a.inp)
    with torch.no_grad():
        y = model(x, src, dst)
    case = {"nodes": a.nodes, "src": src.tolist(), "dst": dst.tolist(),
            "x": x.flatten().tolist(), "in": a.inp, "expected": y.flatten().tolist(), "out": a.out,
            "torch": torch.__version__}
    with open(os.path.join(a.dir, a.name + ".case.json"), "w") as out:
        json.dump(case, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

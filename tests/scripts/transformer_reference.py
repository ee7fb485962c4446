#!/usr/bin/env python3
"""PyTorch reference for dype's served transformer encoder: torch.nn.TransformerEncoder of
nn.TransformerEncoderLayer(batch_first=True, dropout=0), post-norm or pre-norm, ReLU or GELU, with
attention restricted to the band |i - j| <= window / 2 by a float mask of -inf outside it (what dype's
window attention computes). Writes a model repository entry (config.yaml, model.safetensors under the
state-dict names PyTorch writes: layers.{i}.self_attn.in_proj_weight, ...) and case.json with token
embeddings and PyTorch's output for them.

  transformer_reference.py --d-model 32 --heads 4 --ffn 64 --layers 2 --window 8 --dir /tmp/repo --name t
"""
import argparse
import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyg_reference import write_safetensors  # noqa: E402


def band_mask(seq, window):
    i = torch.arange(seq)
    far = (i[:, None] - i[None, :]).abs() > window // 2
    return torch.zeros(seq, seq).masked_fill(far, float("-inf"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--seq", type=int, default=50)
    p.add_argument("--norm-first", action="store_true")
    p.add_argument("--activation", choices=["relu", "gelu"], default="relu")
    p.add_argument("--layer-norm-eps", type=float, default=1e-5)
    p.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", required=True, help="model repository folder")
    p.add_argument("--name", required=True, help="model name (folder)")
    a = p.parse_args()

    torch.manual_seed(a.seed)
    layer = nn.TransformerEncoderLayer(a.d_model, a.heads, a.ffn, dropout=0.0, activation=a.activation,
                                       layer_norm_eps=a.layer_norm_eps, batch_first=True,
                                       norm_first=a.norm_first)
    model = nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False)
    with torch.no_grad():  # LayerNorm far from identity and biases far from zero, so both are exercised
        for name, t in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                t.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                t.uniform_(-0.3, 0.3)
    model.eval()

    folder = os.path.join(a.dir, a.name)
    os.makedirs(folder, exist_ok=True)
    stored = write_safetensors(os.path.join(folder, "model.safetensors"), dict(model.state_dict()), a.dtype)
    model.load_state_dict(stored)  # compute with what dype reads

    cfg = ["family: transformer", f"d_model: {a.d_model}", f"heads: {a.heads}", f"ffn: {a.ffn}",
           f"layers: {a.layers}", f"window: {a.window}", f"norm_first: {'true' if a.norm_first else 'false'}",
           f"activation: {a.activation}", f"layer_norm_eps: {a.layer_norm_eps}"]
    with open(os.path.join(folder, "config.yaml"), "w") as out:
        out.write("\n".join(cfg) + "\n")

    g = torch.Generator().manual_seed(a.seed + 1000)
    x = torch.randn(1, a.seq, a.d_model, generator=g)
    with torch.no_grad():
        y = model(x, mask=band_mask(a.seq, a.window))
    case = {"seq": a.seq, "d_model": a.d_model, "window": a.window, "x": x.flatten().tolist(),
            "expected": y.flatten().tolist(), "torch": torch.__version__}
    with open(os.path.join(a.dir, a.name + ".case.json"), "w") as out:
        json.dump(case, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Trains the example models of models/ in PyTorch on a real labelled graph a Debian package ships.

Zachary's karate club (python3-networkx's karate_club_graph: 34 members, 78 friendships, each
member labelled with the club they joined after the split, 'Mr. Hi' or 'Officer'). Features are
one-hot member ids (34), as in Kipf & Welling's karate example. Half the members (stratified,
seeded) are the training set; the rest are held out.

Writes, per model, models/<name>/config.yaml and model.safetensors (PyG names, see
tests/scripts/pyg_reference.py for the layer definitions), and models/karate/ the graph as a
Matrix Market file (both directions of each friendship), features.npy, labels.txt, split.txt and
reference.json: PyTorch's predictions and accuracies, which dype's must equal.

  /usr/bin/python3 scripts/train_example_models.py [--out models]
"""
import argparse
import json
import os
import sys

import networkx as nx
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "scripts"))
from pyg_reference import GNN, write_safetensors  # noqa: E402


def karate():
    g = nx.karate_club_graph()
    n = g.number_of_nodes()
    clubs = sorted(set(nx.get_node_attributes(g, "club").values()))  # ['Mr. Hi', 'Officer']
    labels = torch.tensor([clubs.index(g.nodes[i]["club"]) for i in range(n)])
    src, dst = [], []
    for a, b in g.edges():
        src += [a, b]
        dst += [b, a]
    return n, torch.tensor(src), torch.tensor(dst), labels, clubs


def split(labels, seed):
    gen = torch.Generator().manual_seed(seed)
    train = torch.zeros(labels.numel(), dtype=torch.bool)
    for c in labels.unique():
        idx = (labels == c).nonzero().flatten()
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        train[idx[: idx.numel() // 2]] = True
    return train


def train_one(family, n, src, dst, labels, train, hidden, seed):
    torch.manual_seed(seed)
    args = argparse.Namespace(family=family, inp=n, hidden=hidden, out=2, layers=2, eps=0.0, batch_norm=False)
    model = GNN(args)
    x = torch.eye(n)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(200):
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x, src, dst)[train], labels[train])
        loss.backward()
        opt.step()
    model.eval()
    return model, args


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    n, src, dst, labels, clubs = karate()
    train = split(labels, a.seed)
    data = os.path.join(a.out, "karate")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "karate.mtx"), "w") as f:
        f.write("%%MatrixMarket matrix coordinate pattern general\n")
        f.write("% Zachary's karate club (python3-networkx karate_club_graph), both directions of each edge\n")
        f.write(f"{n} {n} {src.numel()}\n")
        for s, d in zip(src.tolist(), dst.tolist()):
            f.write(f"{s + 1} {d + 1}\n")
    np.save(os.path.join(data, "features.npy"), np.eye(n, dtype=np.float32))  # one-hot member ids
    with open(os.path.join(data, "labels.txt"), "w") as f:
        f.write("".join(f"{int(c)}\n" for c in labels))
    with open(os.path.join(data, "split.txt"), "w") as f:
        f.write("".join("train\n" if t else "test\n" for t in train.tolist()))
    reference = {"graph": "karate.mtx", "classes": clubs, "torch": torch.__version__, "models": {}}
    for family in ("gcn", "gin", "sage"):
        model, args = train_one(family, n, src, dst, labels, train, 16, a.seed)
        name = f"karate-{family}"
        folder = os.path.join(a.out, name)
        os.makedirs(folder, exist_ok=True)
        weights = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
        write_safetensors(os.path.join(folder, "model.safetensors"), weights, "F32")
        with open(os.path.join(folder, "config.yaml"), "w") as f:
            f.write(f"# {family.upper()} trained on Zachary's karate club (models/karate, scripts/train_example_models.py)\n")
            f.write(f"family: {family}\nin_features: {n}\nhidden: 16\nout_features: 2\nlayers: 2\nactivation: relu\n")
            if family == "gin":
                f.write("eps: 0.0\n")
            f.write("outputs: [logits, predictions]   # the scores, and the arg-max club per member\n")
        with torch.no_grad():
            pred = model(torch.eye(n), src, dst).argmax(1)
        ok = pred == labels
        reference["models"][name] = {
            "predictions": pred.tolist(),
            "accuracy_all": int(ok.sum()) / ok.numel(),
            "accuracy_test": int(ok[~train].sum()) / int((~train).sum()),
            "accuracy_train": int(ok[train].sum()) / int(train.sum()),
        }
        print(f"{name}: accuracy {reference['models'][name]['accuracy_test']:.3f} held out, "
              f"{reference['models'][name]['accuracy_all']:.3f} all (torch {torch.__version__})")
    with open(os.path.join(data, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

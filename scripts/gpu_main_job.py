#!/usr/bin/env python3
"""The python side of the main-job step of scripts/gpu_check.sh (driven by scripts/gpu_main_job.sh).

    prepare  writes a model repository entry for dype's gcn family (config.yaml + model.safetensors:
             a GCN 128 -> 128 -> 16, seeded) and 128 seeded features per node of the graph (.npy).
             The weights come from PyTorch Geometric's models.GCN where torch_geometric imports,
             else from numpy, else from python's random; safetensors is written with the
             safetensors package when it is there, else by hand (u64 header length, JSON, raw F32).
    plan     reads `dype-client admin plan` JSON on stdin, prints label, epoch, pipeline, cost source.
    devices  reads `dype-client admin devices` JSON on stdin, prints a line per device (what the
             daemon detected and how it plans each: why a GPU is left out of the plan).
    buffers  reads dype-serve's metrics (--port) and prints its receive buffers: how many bytes are
             pinned for the GPU's DMA, and how often a kept buffer served a request.
    compare  checks dype's answer (dype-client infer --out, .npy) against a reference computed on
             the same GPU from the same weights, graph and features: PyG's models.GCN (auto, where it
             imports), a plain-torch GCN written the way GCNConv computes (--reference torch) or none
             (the answer's shape and finiteness only), and prints dype's request p50 beside the
             reference's whole request (features host -> GPU, forward, answer back, synchronised).
             The verdict (--tol, 1e-4) is against the reference run in float64: a float32 run carries
             its own rounding (torch's on the CPU: 1.0e-4 at the Debian graph's hub row, 21,840
             in-edges, |y| 61), as large as the tolerance; its diff and its error against float64
             are printed beside.

torch, numpy and torch_geometric are imported only where present: any python3 runs it.
"""
import argparse
import array
import ast
import json
import math
import os
import random
import struct
import sys
import time

IN, HIDDEN, OUT, LAYERS = 128, 128, 16, 2


def try_import(name):
    try:
        return __import__(name, fromlist=["_"])
    except Exception:  # noqa: BLE001 - a broken install counts as absent
        return None


# ---- files -------------------------------------------------------------------------------------

def mtx_edges(path):
    """(nodes, src, dst) of a pattern Matrix Market file, edge (i, j) going i -> j as dype reads it
    (graph/mtx_reader.cpp: general as written, symmetric mirrored off the diagonal)."""
    with open(path) as f:
        banner = f.readline().lower().split()
        if banner[:4] != ["%%matrixmarket", "matrix", "coordinate", "pattern"] or banner[4] not in ("general", "symmetric"):
            sys.exit(f"{path}: expected a pattern general or symmetric Matrix Market file, got {banner}")
        line = f.readline()
        while line.lstrip().startswith("%") or not line.strip():
            line = f.readline()
        rows, cols, entries = (int(t) for t in line.split())
        values = [int(t) for t in f.read().split()]
    if len(values) != 2 * entries:
        sys.exit(f"{path}: {len(values)} indices for {entries} entries")
    src = [v - 1 for v in values[0::2]]
    dst = [v - 1 for v in values[1::2]]
    if banner[4] == "symmetric":
        extra = [(d, s) for s, d in zip(src, dst) if s != d]
        src += [e[0] for e in extra]
        dst += [e[1] for e in extra]
    return max(rows, cols), src, dst


def mtx_nodes(path):
    with open(path) as f:
        f.readline()
        line = f.readline()
        while line.lstrip().startswith("%") or not line.strip():
            line = f.readline()
    return max(int(t) for t in line.split()[:2])


def write_npy_f32(path, rows, cols, raw):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(raw)


def read_npy_f32(path):
    """(shape, raw little-endian float32 bytes) of a C-order float32 .npy."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    if data[6] == 1:
        hlen, start = struct.unpack("<H", data[8:10])[0], 10
    else:
        hlen, start = struct.unpack("<I", data[8:12])[0], 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        sys.exit(f"{path}: expected C-order float32, got {header}")
    return tuple(header["shape"]), data[start + hlen:]


def write_safetensors_f32(path, tensors):
    """tensors: name -> (shape, raw little-endian float32 bytes). The documented layout."""
    header, offset = {}, 0
    for name, (shape, raw) in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, raw in tensors.values():
            f.write(raw)


def read_safetensors_f32(path):
    """name -> (shape, raw bytes); only F32 (what prepare writes)."""
    with open(path, "rb") as f:
        data = f.read()
    hlen = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + hlen])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name} is {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        out[name] = (tuple(t["shape"]), data[8 + hlen + a:8 + hlen + b])
    return out


def f32_bytes(values):
    a = array.array("f", values)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


# ---- prepare -----------------------------------------------------------------------------------

def weights_pyg(seed):
    import torch
    from torch_geometric.nn.models import GCN
    torch.manual_seed(seed)
    model = GCN(in_channels=IN, hidden_channels=HIDDEN, num_layers=LAYERS, out_channels=OUT)
    # GCNConv starts its biases at zero; seeded non-zero ones make the bias load count.
    with torch.no_grad():
        for conv in model.convs:
            conv.bias.uniform_(-0.1, 0.1)
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items() if v.is_floating_point()}
    import torch_geometric
    return sd, f"PyTorch Geometric {torch_geometric.__version__} models.GCN (torch {torch.__version__}), seed {seed}"


def weights_plain(seed):
    """name -> (shape, raw F32): Glorot-uniform weights and small uniform biases, as PyG's names."""
    np = try_import("numpy")
    widths = [IN] + [HIDDEN] * (LAYERS - 1) + [OUT]
    out = {}
    rng = np.random.default_rng(seed) if np else random.Random(seed)
    for i in range(LAYERS):
        fan_in, fan_out = widths[i], widths[i + 1]
        a = math.sqrt(6.0 / (fan_in + fan_out))
        if np:
            w = rng.uniform(-a, a, (fan_out, fan_in)).astype("<f4").tobytes()
            b = rng.uniform(-0.1, 0.1, fan_out).astype("<f4").tobytes()
        else:
            w = f32_bytes(rng.uniform(-a, a) for _ in range(fan_in * fan_out))
            b = f32_bytes(rng.uniform(-0.1, 0.1) for _ in range(fan_out))
        out[f"convs.{i}.lin.weight"] = ((fan_out, fan_in), w)
        out[f"convs.{i}.bias"] = ((fan_out,), b)
    return out, f"{'numpy ' + np.__version__ if np else 'python random'} (Glorot uniform), seed {seed}"


def save_weights(path, sd):
    """sd: name -> torch tensor, or name -> (shape, raw F32)."""
    torch_tensors = not isinstance(next(iter(sd.values())), tuple)
    st = try_import("safetensors.torch" if torch_tensors else "safetensors.numpy")
    if torch_tensors:
        if st:
            st.save_file(sd, path)
            return "safetensors package"
        sd = {k: (tuple(v.shape), v.cpu().numpy().astype("<f4").tobytes()) if try_import("numpy")
              else (tuple(v.shape), f32_bytes(v.flatten().tolist())) for k, v in sd.items()}
    elif st:
        np = try_import("numpy")
        st.save_file({k: np.frombuffer(raw, "<f4").reshape(shape) for k, (shape, raw) in sd.items()}, path)
        return "safetensors package"
    write_safetensors_f32(path, sd)
    return "written by hand (u64 header length, JSON header, raw F32)"


def prepare(a):
    n = mtx_nodes(a.graph)
    folder = os.path.join(a.repo, a.name)
    os.makedirs(folder, exist_ok=True)
    use_pyg = a.weights == "pyg" or (a.weights == "auto" and try_import("torch_geometric") is not None)
    sd, how = weights_pyg(a.seed) if use_pyg else weights_plain(a.seed)
    how_saved = save_weights(os.path.join(folder, "model.safetensors"), sd)
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        f.write(f"# GCN {IN} -> {HIDDEN} -> {OUT}, seeded weights from {how} (scripts/gpu_main_job.py)\n")
        f.write(f"family: gcn\nin_features: {IN}\nhidden: {HIDDEN}\nout_features: {OUT}\nlayers: {LAYERS}\n"
                "activation: relu\n")
    np = try_import("numpy")
    if np:
        x = np.random.default_rng(a.seed + 1).uniform(-1, 1, (n, IN)).astype("<f4")
        write_npy_f32(a.features, n, IN, x.tobytes())
    else:
        r = random.Random(a.seed + 1).random
        write_npy_f32(a.features, n, IN, f32_bytes(2.0 * r() - 1.0 for _ in range(n * IN)))
    print(f"  model {a.name}: GCN {IN} -> {HIDDEN} -> {OUT}, weights from {how}; safetensors {how_saved}")
    print(f"  features: {n} x {IN} uniform in [-1, 1), seed {a.seed + 1} ({'numpy' if np else 'python random'})")
    return 0


# ---- plan --------------------------------------------------------------------------------------

def plan(_a):
    j = json.load(sys.stdin)
    if "plans" not in j or not j["plans"]:
        print(f"error\t-1\t{j.get('error', j)}\t-")
        return 1
    p = j["plans"][0]
    print(f"{p['label']}\t{p['epoch']}\t{p['pipeline']}\t{p.get('cost_source', '?')}")
    return 0


def devices(_a):
    j = json.load(sys.stdin)
    for d in j.get("devices", []):
        planning = json.dumps(d.get("planning", "no planning information"), separators=(",", ":"))
        print(f"  device {d.get('name')}: {d.get('kind')}, backend {d.get('backend')}, planned as "
              f"{d.get('planned_as')}; {planning[:400]}")
    if "transfers" in j:
        print(f"  transfers: {json.dumps(j['transfers'])}")
    return 0


def buffers(a):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{a.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    got = {}
    for line in text.splitlines():
        if line.startswith("dype_receive_buffer"):
            name, value = line.rsplit(" ", 1)
            got[name] = float(value)
    if not got:
        print("  receive buffers: no dype_receive_buffer metrics")
        return 1

    def metric(name, label=""):  # label: key=value, quoted as the exposition quotes it
        if label:
            key, value = label.split("=")
            name += "{" + key + '="' + value + '"}'
        return got.get(name, 0.0)

    mib = 1 << 20
    pinned = metric("dype_receive_buffer_bytes", "state=pinned") / mib
    free = metric("dype_receive_buffer_bytes", "state=free") / mib
    allocated = metric("dype_receive_buffers_total", "source=allocated")
    reused = metric("dype_receive_buffers_total", "source=reused")
    failed = metric("dype_receive_buffer_pin_failures_total")
    print(f"  receive buffers: {pinned:.1f} MiB pinned, {free:.1f} MiB free, {allocated:.0f} allocated, "
          f"{reused:.0f} reused, {failed:.0f} pin failures")
    return 0


# ---- compare -----------------------------------------------------------------------------------

def plain_gcn(torch, sd, dev, dtype):
    """GCN as PyG's GCNConv computes it (gcn_norm: add_remaining_self_loops, degree at the target,
    D^-1/2 (A + I) D^-1/2 x W^T + b), ReLU between layers; tests/scripts/pyg_reference.py on a device."""
    ws = [(sd[f"convs.{i}.lin.weight"].to(dev), sd[f"convs.{i}.bias"].to(dev)) for i in range(LAYERS)]

    def forward(x, src, dst):
        n = x.size(0)
        keep = src != dst
        ar = torch.arange(n, device=dev)
        s, d = torch.cat([src[keep], ar]), torch.cat([dst[keep], ar])
        deg = torch.zeros(n, device=dev, dtype=dtype).index_add_(0, d, torch.ones(d.numel(), device=dev, dtype=dtype))
        dis = deg.pow(-0.5)
        norm = dis[s] * dis[d]
        for i, (w, b) in enumerate(ws):
            h = x @ w.t()
            x = torch.zeros(n, h.size(1), device=dev, dtype=dtype).index_add_(0, d, norm[:, None] * h[s]) + b
            if i + 1 < LAYERS:
                x = torch.relu(x)
        return x
    return forward


def compare(a):
    shape, raw = read_npy_f32(a.dype_out)
    n = mtx_nodes(a.graph)
    if shape != (n, OUT):
        print(f"  FAILED: dype's answer has shape {list(shape)}, expected [{n}, {OUT}]")
        return 1
    ys = array.array("f")
    ys.frombytes(raw)
    bad = sum(1 for v in ys if not math.isfinite(v))
    if bad:
        print(f"  FAILED: dype's answer holds {bad} NaN or infinite values")
        return 1
    p50 = f"{a.dype_p50_ms:.1f} ms" if a.dype_p50_ms >= 0 else "unknown"
    dype_line = (f"dype p50 {p50} (at the client, gRPC stream, {a.dype_requests} requests, graph registered "
                 f"once, features sent with each)")
    if a.dype_shm_p50_ms >= 0:
        dype_line += (f"; through system shared memory (x and y in regions, dype-client --shm) p50 "
                      f"{a.dype_shm_p50_ms:.1f} ms")
    if a.dype_cuda_shm_p50_ms >= 0:
        dype_line += (f"; through CUDA shared memory (x and y in GPU memory, HTTP, a python client) p50 "
                      f"{a.dype_cuda_shm_p50_ms:.1f} ms")
    reference = a.reference
    if reference == "auto":
        reference = "pyg" if try_import("torch_geometric") is not None else "none"
    if reference == "none":
        print(f"  dype's answer: [{n}, {OUT}], all finite, |y| max {max(abs(v) for v in ys):.3g}; "
              "not compared (torch_geometric does not import in this python)")
        print(f"  request time: {dype_line}")
        return 0

    import torch
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # FP32 as dype computes
        where = torch.cuda.get_device_name(dev)
    else:
        where = "the CPU (torch sees no CUDA device)"
    sd = {k: torch.frombuffer(bytearray(b), dtype=torch.float32).reshape(s)
          for k, (s, b) in read_safetensors_f32(a.weights).items()}
    xs, xraw = read_npy_f32(a.features)
    x_host = torch.frombuffer(bytearray(xraw), dtype=torch.float32).reshape(xs)
    nodes, src, dst = mtx_edges(a.graph)
    edge_index = torch.tensor([src, dst], dtype=torch.long).to(dev)

    def make_forward(dtype):
        """The reference at a precision: float32 as served and timed, float64 as the judge."""
        if reference == "pyg":
            from torch_geometric.nn.models import GCN
            model = GCN(in_channels=IN, hidden_channels=HIDDEN, num_layers=LAYERS, out_channels=OUT)
            model.load_state_dict(sd, strict=True)
            model = model.to(device=dev, dtype=dtype).eval()
            return lambda x: model(x, edge_index)
        f = plain_gcn(torch, {k: v.to(dtype) for k, v in sd.items()}, dev, dtype)
        return lambda x: f(x, edge_index[0], edge_index[1])

    if reference == "pyg":
        import torch_geometric
        name = f"PyG {torch_geometric.__version__} models.GCN"
    else:
        name = "plain-torch GCN (GCNConv's arithmetic, no PyG)"
    forward = make_forward(torch.float32)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    whole, fwd = [], []
    with torch.no_grad():
        y32 = forward(x_host.to(dev)).cpu()  # also the warm-up
        forward(x_host.to(dev)).cpu()
        for _ in range(a.reps):
            sync()
            t0 = time.perf_counter()
            forward(x_host.to(dev)).cpu()
            sync()
            whole.append((time.perf_counter() - t0) * 1e3)
        x_dev = x_host.to(dev)
        for _ in range(a.reps):
            sync()
            t0 = time.perf_counter()
            forward(x_dev)
            sync()
            fwd.append((time.perf_counter() - t0) * 1e3)
        del x_dev
        y64 = make_forward(torch.float64)(x_host.to(dev, torch.float64)).cpu()
    dype_y = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape).double()
    err = (dype_y - y64).abs()
    diff = err.max().item()
    worst = int(err.max(dim=1).values.argmax().item())
    in_deg = int((edge_index[1] == worst).sum().item())
    ok = diff <= a.tol
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    print(f"  reference: {name}, torch {torch.__version__}, on {where}, {nodes} nodes, {len(src)} edges")
    print(f"  answers: max |dype - reference in float64| = {diff:.3g} over {n} x {OUT} (tolerance {a.tol:g}): "
          f"{'equal' if ok else 'FAILED, they differ'}; largest at node {worst} ({in_deg} in-edges, "
          f"|y| {y64[worst].abs().max().item():.3g}; |y| max {y64.abs().max().item():.3g})")
    print(f"           beside the float32 reference: max |dype - it| = {(dype_y - y32.double()).abs().max().item():.3g}, "
          f"its own error against float64 {(y32.double() - y64).abs().max().item():.3g}")
    print(f"  request time (measured): {dype_line}")
    print(f"                           reference (float32) whole request median {med(whole):.2f} ms (features "
          f"host -> {dev.type}, forward, answer back, synchronised; {a.reps} runs), forward alone {med(fwd):.2f} ms")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--graph", required=True)
    pp.add_argument("--repo", required=True)
    pp.add_argument("--name", default="gcn-main")
    pp.add_argument("--features", required=True, help=".npy to write")
    pp.add_argument("--seed", type=int, default=2026)
    pp.add_argument("--weights", choices=["auto", "pyg", "plain"], default="auto")
    sub.add_parser("plan")
    sub.add_parser("devices")
    pb = sub.add_parser("buffers")
    pb.add_argument("--port", type=int, required=True, help="dype-serve's metrics port")
    pc = sub.add_parser("compare")
    pc.add_argument("--graph", required=True)
    pc.add_argument("--weights", required=True, help="the model.safetensors dype served")
    pc.add_argument("--features", required=True)
    pc.add_argument("--dype-out", required=True)
    pc.add_argument("--dype-p50-ms", type=float, default=-1)
    pc.add_argument("--dype-shm-p50-ms", type=float, default=-1)
    pc.add_argument("--dype-cuda-shm-p50-ms", type=float, default=-1)
    pc.add_argument("--dype-requests", type=int, default=0)
    pc.add_argument("--reference", choices=["auto", "pyg", "torch", "none"], default="auto")
    pc.add_argument("--tol", type=float, default=1e-4)
    pc.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    return {"prepare": prepare, "plan": plan, "devices": devices, "buffers": buffers,
            "compare": compare}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

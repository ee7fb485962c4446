#!/usr/bin/env python3
"""A client of dype-serve's CUDA shared-memory extension written from the KServe/Triton protocol
alone (HTTP/REST, python's http.client, the CUDA runtime through ctypes), as a GPU machine's
scripts/gpu_main_job.sh runs it: it cudaMalloc's x and y on the GPU, writes the seeded features into
x, registers both with `POST v2/cudasharedmemory/region/{name}/register` ({"raw_handle": {"b64"},
"device_id", "byte_size"}: cudaIpcGetMemHandle's 64 bytes), registers the graph once, then sends
requests that name the regions (parameters shared_memory_region / _byte_size / _offset) and carry
no tensor data. It fails unless every answer lands in y on the GPU, equals dype's answer through
the protocol for the same features (--expect, .npy) within --tol, and a NaN written into x on the
GPU, an unknown region and a byte_size that does not match x's shape are refused with 400/404.
Prints the request p50.

    python3 scripts/gpu_cuda_shm_client.py --http-port P --model gcn-main --graph G.mtx \
        --features x.npy --expect y.npy [--requests 12]
"""
import argparse
import array
import base64
import ctypes
import glob
import http.client
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_main_job import mtx_edges, read_npy_f32  # noqa: E402  (the same readers as the main job)

H2D, D2H = 1, 2  # cudaMemcpyKind


def load_cudart():
    """The CUDA runtime: the one a torch in this python already loaded, else the toolkit's."""
    try:
        import torch  # noqa: F401 - loads the wheel's libcudart, then found by its soname below
        if torch.cuda.is_available():
            torch.cuda.init()
    except Exception:  # noqa: BLE001 - torch is optional here
        pass
    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    names += sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"), reverse=True)
    for site in sys.path:
        names += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libcudart.so*")), reverse=True)
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    sys.exit("cuda-shm: no CUDA runtime (libcudart) found")


class Cuda:
    def __init__(self, lib, device):
        self.lib = lib
        self.lib.cudaGetErrorString.restype = ctypes.c_char_p
        self.call("cudaSetDevice", ctypes.c_int(device))

    def call(self, fn, *args):
        rc = getattr(self.lib, fn)(*args)
        if rc != 0:
            raise RuntimeError(f"{fn}: {self.lib.cudaGetErrorString(rc).decode()} ({rc})")

    def malloc(self, n):
        p = ctypes.c_void_p()
        self.call("cudaMalloc", ctypes.byref(p), ctypes.c_size_t(n))
        return p

    def ipc_handle(self, p):
        h = ctypes.create_string_buffer(64)  # cudaIpcMemHandle_t: 64 opaque bytes
        self.call("cudaIpcGetMemHandle", h, p)
        return h.raw

    def to_device(self, p, raw):
        self.call("cudaMemcpy", p, ctypes.c_char_p(raw), ctypes.c_size_t(len(raw)), ctypes.c_int(H2D))

    def to_host(self, p, n):
        b = ctypes.create_string_buffer(n)
        self.call("cudaMemcpy", b, p, ctypes.c_size_t(n), ctypes.c_int(D2H))
        return b.raw


class Http:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path, body, headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.c.request("POST", path, data, headers or {"Content-Type": "application/json"})
        r = self.c.getresponse()
        return r.status, r.read()


def shm(region, size, offset=0):
    return {"shared_memory_region": region, "shared_memory_byte_size": size, "shared_memory_offset": offset}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--features", required=True)
    ap.add_argument("--expect", required=True, help="dype's answer for --features through the protocol (.npy)")
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()

    (n, f), xraw = read_npy_f32(a.features)
    (en, out), expect = read_npy_f32(a.expect)
    nodes, src, dst = mtx_edges(a.graph)
    assert en == n == nodes, f"x has {n} rows, the answer {en}, the graph {nodes} nodes"
    cuda = Cuda(load_cudart(), a.device)
    xb, yb = len(xraw), n * out * 4
    x_dev, y_dev = cuda.malloc(xb), cuda.malloc(yb)
    cuda.to_device(x_dev, xraw)
    web = Http(a.http_port)

    ei = array.array("q", src + dst).tobytes()  # little-endian on the x86 hosts this runs on
    header = json.dumps({"inputs": [{"name": "edge_index", "datatype": "INT64", "shape": [2, len(src)],
                                     "parameters": {"binary_data_size": len(ei)}}],
                         "parameters": {"num_nodes": n}}).encode()
    st, body = web.post("/v2/dype/graphs", header + ei, {"Inference-Header-Content-Length": str(len(header)),
                                                        "Content-Type": "application/octet-stream"})
    assert st == 200, f"graph registration: HTTP {st}: {body[:300]!r}"
    graph_id = json.loads(body)["id"]
    regs = []
    try:
        for name, p, size in (("x_cuda", x_dev, xb), ("y_cuda", y_dev, yb)):
            st, body = web.post(f"/v2/cudasharedmemory/region/{name}/register",
                                {"raw_handle": {"b64": base64.b64encode(cuda.ipc_handle(p)).decode()},
                                 "device_id": a.device, "byte_size": size})
            assert st == 200, f"register {name}: HTTP {st}: {body[:300]!r}"
            regs.append(name)
        print(f"  cuda-shm: regions x_cuda ({xb} bytes) and y_cuda ({yb} bytes) on cuda:{a.device}, graph {graph_id}")

        def request(x_region="x_cuda", x_size=xb):
            return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [n, f], "parameters": shm(x_region, x_size)}],
                    "outputs": [{"name": "y", "parameters": shm("y_cuda", yb)}],
                    "parameters": {"graph_id": graph_id}}

        path = f"/v2/models/{a.model}/infer"
        lat = []
        for i in range(a.requests + 2):  # two warm-ups
            t0 = time.perf_counter()
            st, body = web.post(path, request())
            dt = (time.perf_counter() - t0) * 1e3
            assert st == 200, f"infer through CUDA shared memory: HTTP {st}: {body[:300]!r}"
            if i >= 2:
                lat.append(dt)
        y_out = json.loads(body)["outputs"][0]
        assert "data" not in y_out and y_out["parameters"]["shared_memory_region"] == "y_cuda", \
            f"the answer should name region y_cuda and carry no data: {json.dumps(y_out)[:300]}"
        got = struct.unpack(f"<{n * out}f", cuda.to_host(y_dev, yb))
        want = struct.unpack(f"<{n * out}f", expect)
        diff = max(abs(g - w) for g, w in zip(got, want))
        ok = diff <= a.tol
        print(f"  cuda-shm: y read back from the GPU, max |y - dype's protocol answer| = {diff:.3g} "
              f"(tolerance {a.tol:g}): {'equal' if ok else 'FAILED, they differ'}")
        # A NaN at x[5][3], written on the GPU: refused, naming it (checked where it lies), then put back.
        at = (5 * f + 3) * 4
        cuda.to_device(ctypes.c_void_p(x_dev.value + at), struct.pack("<f", float("nan")))
        st, body = web.post(path, request())
        cuda.to_device(ctypes.c_void_p(x_dev.value + at), xraw[at:at + 4])
        print(f"  cuda-shm: a NaN at x[5][3] in GPU memory: HTTP {st} {body[:160].decode(errors='replace')}")
        ok &= st == 400 and b"[5][3]" in body
        st, body = web.post(path, request(x_region="no_such_region"))
        print(f"  cuda-shm: an unknown region: HTTP {st} {body[:160].decode(errors='replace')}")
        ok &= st in (400, 404)
        st, body = web.post(path, request(x_size=xb - 4))
        print(f"  cuda-shm: byte_size 4 short of x: HTTP {st} {body[:160].decode(errors='replace')}")
        ok &= st == 400
        lat.sort()
        print(f"  cuda-shm: p50 {lat[len(lat) // 2]:.2f} ms over {len(lat)} requests (HTTP, x and y in GPU "
              f"memory, graph registered once; measured at this client)")
        print(f"cuda_shm_p50_ms {lat[len(lat) // 2]:.3f}")
        return 0 if ok else 1
    finally:
        for name in regs:
            web.post(f"/v2/cudasharedmemory/region/{name}/unregister", b"")
        web.c.request("DELETE", f"/v2/dype/graphs/{graph_id}")
        web.c.getresponse().read()
        cuda.call("cudaFree", x_dev)
        cuda.call("cudaFree", y_dev)


if __name__ == "__main__":
    sys.exit(main())

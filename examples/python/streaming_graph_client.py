#!/usr/bin/python3
"""A gRPC client of dype-serve's streaming graphs, written from the published protocol only: stubs
generated at start from runtime/daemon/proto/grpc_service.proto (KServe v2) and dype_graphs.proto.

It registers a random graph with its node features, streams updates to it on one UpdateStream
(edges added and removed, one update refused on purpose), and after each asks the GCN for the graph
twice: with no features (answered from the activations the daemon keeps) and with the features
sent (the whole graph through the engine). The two must agree, node_ids must pick rows, and a stale
graph_version must be refused. Needs Debian's python3-grpcio, python3-grpc-tools and python3-numpy:

  dype-serve --builtin-models --grpc-port 8001 &
  /usr/bin/python3 examples/python/streaming_graph_client.py --grpc-port 8001
"""
import argparse
import json
import os
import sys
import tempfile

import grpc
import numpy as np
from grpc_tools import protoc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load_stubs():
    """Compiles both protos into a temporary folder and imports the generated modules."""
    with tempfile.TemporaryDirectory(prefix="dype_stubs_") as out:
        protos = ["runtime/daemon/proto/grpc_service.proto", "runtime/daemon/proto/dype_graphs.proto"]
        args = ["protoc", "-I" + ROOT, "--python_out=" + out, "--grpc_python_out=" + out] + protos
        if protoc.main(args) != 0:
            sys.exit("protoc could not compile " + " ".join(protos))
        sys.path.insert(0, out)
        from runtime.daemon.proto import grpc_service_pb2, grpc_service_pb2_grpc, dype_graphs_pb2, dype_graphs_pb2_grpc
        sys.path.remove(out)
    return grpc_service_pb2, grpc_service_pb2_grpc, dype_graphs_pb2, dype_graphs_pb2_grpc


def check(ok, line):
    if not ok:
        raise AssertionError(line)
    print(line)


def add_tensor(request, name, array):
    t = request.inputs.add()
    t.name = name
    t.datatype = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}[array.dtype]
    t.shape.extend(array.shape)
    request.raw_input_contents.append(np.ascontiguousarray(array).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--grpc-port", type=int, default=8001)
    ap.add_argument("--model", default="gcn")
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--edges", type=int, default=1500)
    ap.add_argument("--updates", type=int, default=20)
    a = ap.parse_args()
    pb, pb_grpc, gpb, gpb_grpc = load_stubs()
    channel = grpc.insecure_channel(f"{a.host}:{a.grpc_port}")
    infer = pb_grpc.GRPCInferenceServiceStub(channel)
    graphs = gpb_grpc.DypeGraphsStub(channel)
    meta = infer.ModelMetadata(pb.ModelMetadataRequest(name=a.model))
    features = [t for t in meta.inputs if t.name == "x"][0].shape[1]
    rng = np.random.default_rng(3)
    src = rng.integers(0, a.nodes, a.edges)
    dst = rng.integers(0, a.nodes, a.edges)
    x = rng.standard_normal((a.nodes, features)).astype(np.float32)

    reg = pb.ModelInferRequest()
    add_tensor(reg, "edge_index", np.stack([src, dst]).astype(np.int64))
    add_tensor(reg, "x", x)
    answer = json.loads(graphs.Register(reg).json)
    graph_id = answer["id"]
    check(answer["feature_len"] == features and answer["version"] == 0,
          f"registered {graph_id}: {answer['num_nodes']} nodes, {answer['num_edges']} edges, {features} features")

    def ask(send_x, node_ids=None, version=None):
        r = pb.ModelInferRequest(model_name=a.model)
        r.parameters["graph_id"].string_param = graph_id
        if version is not None:
            r.parameters["graph_version"].int64_param = version
        if send_x:
            add_tensor(r, "x", x)
        if node_ids is not None:
            add_tensor(r, "node_ids", np.asarray(node_ids, dtype=np.int64))
        out = infer.ModelInfer(r)
        i = [o.name for o in out.outputs].index("y")
        return np.frombuffer(out.raw_output_contents[i], dtype=np.float32).reshape(tuple(out.outputs[i].shape))

    def agree(what):
        kept, whole = ask(False), ask(True)
        err = float(np.max(np.abs(kept - whole)) / max(np.max(np.abs(whole)), 1e-30))
        check(err < 1e-5, f"{what}: kept activations vs whole graph through the engine, relative error {err:.2e}")
        return kept

    y = agree("version 0")
    ids = [7, 0, 7, a.nodes - 1]
    check(np.array_equal(ask(False, ids), y[ids]), "node_ids [7, 0, 7, last] pick those rows in that order")

    def update(i):
        u = gpb.GraphUpdateRequest(graph_id=graph_id)
        if i == 5:  # out of range on purpose: refused, nothing applied, the stream goes on
            add_tensor(u.tensors, "add_edges", np.array([[0], [a.nodes + 10]], dtype=np.int64))
            return u
        add_tensor(u.tensors, "add_edges", rng.integers(0, a.nodes, (2, 3)).astype(np.int64))
        if i % 4 == 0:
            add_tensor(u.tensors, "remove_edges", np.array([[src[i]], [dst[i]]], dtype=np.int64))
        return u

    version = 0
    for i, r in enumerate(graphs.UpdateStream(update(i) for i in range(a.updates))):
        if i == 5:
            check("add_edges[1][0]" in r.error_message and "out of range" in r.error_message,
                  f"update {i} refused: {r.error_message}")
            continue
        version = json.loads(r.json)["version"]
    check(version == a.updates - 1, f"{a.updates} updates streamed, {a.updates - 1} applied: version {version}")
    agree(f"version {version}")
    try:
        ask(False, version=0)
        check(False, "a stale graph_version was answered")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "is gone" in e.details(),
              f"graph_version 0: {e.code().name} ({e.details()})")
    graphs.Delete(gpb.GraphUpdateRequest(graph_id=graph_id))
    print("streaming_graph_client: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

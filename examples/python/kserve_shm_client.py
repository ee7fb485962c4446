#!/usr/bin/python3
"""A KServe v2 / Triton gRPC client of dype-serve's system shared-memory extension, written from the
published protocol only: stubs generated from runtime/daemon/proto/grpc_service.proto at start.

Input x goes to the daemon and output y comes back through a POSIX shared-memory object; edge_index
travels in the request. The answer must equal the one without shared memory, and bad uses must get
their gRPC codes. Needs Debian's python3-grpcio, python3-grpc-tools and python3-numpy:

  dype-serve --builtin-models --allow-client-shm --grpc-port 8001 &
  /usr/bin/python3 examples/python/kserve_shm_client.py --grpc-port 8001
"""
import argparse
import os
import sys
import tempfile
from multiprocessing import shared_memory

import grpc
import numpy as np
from grpc_tools import protoc

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime", "daemon", "proto")


def load_stubs():
    """Compiles grpc_service.proto into a temporary folder and imports the generated modules."""
    with tempfile.TemporaryDirectory(prefix="kserve_stubs_") as out:
        # protoc.main takes protoc's own argv (program name first) and returns its exit status.
        args = ["protoc", "-I" + PROTO_DIR, "--python_out=" + out, "--grpc_python_out=" + out, "grpc_service.proto"]
        if protoc.main(args) != 0:
            sys.exit("protoc could not compile " + os.path.join(PROTO_DIR, "grpc_service.proto"))
        sys.path.insert(0, out)
        import grpc_service_pb2, grpc_service_pb2_grpc
        sys.path.remove(out)
    return grpc_service_pb2, grpc_service_pb2_grpc


def check(ok, line):
    if not ok:
        raise AssertionError(line)
    print(line)


def expect_code(code, call, what):
    try:
        call()
    except grpc.RpcError as e:
        check(e.code() == code, f"{what}: {e.code().name} ({e.details()})")
        return
    check(False, f"{what}: accepted, expected {code.name}")


def shm_params(params, region, byte_size, offset=0):
    params["shared_memory_region"].string_param = region
    params["shared_memory_byte_size"].int64_param = byte_size
    params["shared_memory_offset"].int64_param = offset


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--grpc-port", type=int, help="dype-serve's gRPC port (or --target)")
    ap.add_argument("--target", help="a gRPC target instead of host:port, e.g. unix:/run/dype.sock (dype-serve --grpc-socket)")
    ap.add_argument("--model", default="gcn")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--edges", type=int, default=800)
    ap.add_argument("--features", type=int, help="columns of x (default: from the model's metadata)")
    a = ap.parse_args()
    if not a.target and a.grpc_port is None:
        ap.error("give --grpc-port or --target")
    target = a.target or f"{a.host}:{a.grpc_port}"
    sys.stdout.reconfigure(line_buffering=True)  # the check lines in order with a failure on stderr

    pb, pb_grpc = load_stubs()
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=30)
    except grpc.FutureTimeoutError:
        raise AssertionError(f"no gRPC server answers at {target}")
    stub = pb_grpc.GRPCInferenceServiceStub(channel)

    meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=a.model))
    shapes = {t.name: list(t.shape) for t in list(meta.inputs) + list(meta.outputs)}
    x_shape, y_shape = shapes.get("x", [0]), shapes.get("y", [0])  # [-1, F] and [-1, C]: any number of nodes
    features, y_cols = a.features or x_shape[-1], y_shape[-1]
    check(features > 0 and y_cols > 0, f"metadata: {a.model} takes x {x_shape}, gives y {y_shape}")

    rng = np.random.default_rng(7)
    x = rng.standard_normal((a.nodes, features)).astype("<f4")
    edge_index = rng.integers(0, a.nodes, size=(2, a.edges)).astype("<i8")
    x_bytes, y_bytes = x.nbytes, a.nodes * y_cols * 4
    y_offset = (x_bytes + 63) // 64 * 64  # region y starts here in the object

    def request(x_region=None, x_size=None, y_region=None):
        q = pb.ModelInferRequest(model_name=a.model)
        xi = q.inputs.add(name="x", datatype="FP32", shape=x.shape)
        q.inputs.add(name="edge_index", datatype="INT64", shape=edge_index.shape)
        yo = q.outputs.add(name="y")
        if x_region:
            shm_params(xi.parameters, x_region, x_size or x_bytes)
        else:
            q.raw_input_contents.append(x.tobytes())
        q.raw_input_contents.append(edge_index.tobytes())  # one entry per input not in shared memory
        if y_region:
            shm_params(yo.parameters, y_region, y_bytes)
        return q

    shm = shared_memory.SharedMemory(name=f"kserve_shm_{os.getpid()}", create=True, size=y_offset + y_bytes)
    key = "/" + shm.name  # the shm_open name of the object
    try:
        shm.buf[:x_bytes] = x.tobytes()
        for name, offset, size in (("x", 0, x_bytes), ("y", y_offset, y_bytes)):
            stub.SystemSharedMemoryRegister(
                pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=offset, byte_size=size))
        print(f"register: regions x (offset 0, {x_bytes} bytes) and y (offset {y_offset}, {y_bytes} bytes) of {key}")

        r = stub.ModelInfer(request(x_region="x", y_region="y"))
        y_out = r.outputs[0]
        n = int(np.prod(y_out.shape)) * 4
        check(y_out.name == "y" and y_out.parameters["shared_memory_region"].string_param == "y" and n <= y_bytes,
              f"infer through shared memory: y {y_out.datatype} {list(y_out.shape)} in region y")
        y_shm = np.frombuffer(bytes(shm.buf[y_offset:y_offset + n]), dtype="<f4").reshape(y_out.shape)

        r = stub.ModelInfer(request())
        y_raw = np.frombuffer(r.raw_output_contents[0], dtype="<f4").reshape(r.outputs[0].shape)
        diff = float(np.max(np.abs(y_shm - y_raw))) if y_shm.shape == y_raw.shape else float("inf")
        check(diff <= 1e-6, f"infer through raw contents: y {list(y_raw.shape)}, max |difference| {diff:g}")

        regions = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions
        listed = ", ".join(f"{k} ({v.key} +{v.offset}, {v.byte_size} bytes)" for k, v in sorted(regions.items()))
        check(sorted(regions) == ["x", "y"] and regions["y"].key == key and regions["y"].offset == y_offset,
              "status: " + listed)

        expect_code(grpc.StatusCode.NOT_FOUND, lambda: stub.ModelInfer(request(x_region="no_such_region")),
                    "unknown region")
        expect_code(grpc.StatusCode.INVALID_ARGUMENT,
                    lambda: stub.ModelInfer(request(x_region="x", x_size=x_bytes - 4)),
                    "byte_size not matching shape and datatype")

        stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())  # no name: every region
        left = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions
        check(len(left) == 0, "unregister: no regions left")
    finally:
        try:  # the daemon lets go of the object even when a check failed halfway
            stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        except grpc.RpcError:
            pass
        shm.close()
        shm.unlink()
    print("kserve_shm_client: ok")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, grpc.RpcError) as e:
        detail = f"{e.code().name}: {e.details()}" if isinstance(e, grpc.RpcError) else str(e)
        print(f"kserve_shm_client: FAILED: {detail}", file=sys.stderr)
        sys.exit(1)

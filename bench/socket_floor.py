#!/usr/bin/env python3
"""What moving a payload between two processes of this machine costs, with nothing on top: BYTES
sent by one process and received by another into a buffer of their own, over TCP loopback and over
a Unix-domain stream socket, REPS times each (after one warm-up). No protocol, no parsing: the
floor under dype-serve's gRPC and HTTP raw paths, measured beside them by run_serving_path.sh.
Prints one line per transport: "<transport> median_ms=.. min_ms=.. (measured)".

usage: socket_floor.py BYTES [REPS]
"""
import os
import socket
import statistics
import sys
import tempfile
import time


def floor_ms(family, size, reps):
    with tempfile.TemporaryDirectory() as tmp:
        if family == socket.AF_UNIX:
            address = os.path.join(tmp, "floor.sock")
        else:
            address = ("127.0.0.1", 0)
        server = socket.socket(family, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(1)
        address = server.getsockname()
        child = os.fork()
        if child == 0:  # the sender: waits for a go byte, then sends the payload
            try:
                c = socket.socket(family, socket.SOCK_STREAM)
                c.connect(address)
                payload = bytearray(os.urandom(1 << 20)) * (size >> 20) + bytearray(size % (1 << 20))
                for _ in range(reps + 1):
                    if not c.recv(1):
                        break
                    c.sendall(payload)
            finally:
                os._exit(0)
        conn, _ = server.accept()
        buf = bytearray(size)
        view = memoryview(buf)
        times = []
        for _ in range(reps + 1):
            t = time.perf_counter()
            conn.sendall(b"g")
            got = 0
            while got < size:
                n = conn.recv_into(view[got:], size - got)
                if n == 0:
                    raise SystemExit("socket_floor: the sender closed early")
                got += n
            times.append((time.perf_counter() - t) * 1e3)
        conn.close()
        os.waitpid(child, 0)
        return times[1:]


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    size = int(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) == 3 else 20
    for name, family in (("tcp_loopback", socket.AF_INET), ("unix_socket", socket.AF_UNIX)):
        t = floor_ms(family, size, reps)
        print(f"{name} median_ms={statistics.median(t):.3g} min_ms={min(t):.3g} (measured)")


if __name__ == "__main__":
    main()

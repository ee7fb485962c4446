#!/usr/bin/env python3
"""Writes a real-world graph for validating SpMM models: the Debian package dependency graph.

Every machine with apt has it offline (after `apt-get update`): ~60k packages, ~300k Depends /
Pre-Depends / Recommends edges, with the heavy-tailed in-degree of real networks (libc6 is
depended on by tens of thousands of packages). Output is Matrix Market (pattern, general).

    python3 apps/dype-profile/debian_deps_graph.py /tmp/debian-deps.mtx
    dype-profile validate configs/perfmodels/generic-cpu.json --graph /tmp/debian-deps.mtx
"""
import glob
import re
import subprocess
import sys


def package_lists():
    for path in sorted(glob.glob("/var/lib/apt/lists/*_main_binary-amd64_Packages*")):
        if path.endswith(".lz4"):
            yield subprocess.run(["lz4", "-dc", path], check=True, capture_output=True).stdout.decode(
                "utf-8", "replace")
        elif path.endswith(".gz"):
            import gzip
            yield gzip.open(path, "rt", errors="replace").read()
        elif path.endswith(".xz"):
            import lzma
            yield lzma.open(path, "rt", errors="replace").read()
        else:
            yield open(path, errors="replace").read()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: debian_deps_graph.py OUT.mtx")
    ids = {}
    edges = set()

    def node(name):
        return ids.setdefault(name, len(ids))

    field = re.compile(r"^(Package|Depends|Pre-Depends|Recommends):\s*(.*)$")
    for text in package_lists():
        for stanza in text.split("\n\n"):
            pkg, deps = None, []
            for line in stanza.splitlines():
                m = field.match(line)
                if not m:
                    continue
                if m.group(1) == "Package":
                    pkg = m.group(2).strip()
                else:
                    for alt in m.group(2).split(","):
                        dep = alt.split("|")[0].strip().split(" ")[0].split(":")[0]
                        if dep:
                            deps.append(dep)
            if pkg:
                u = node(pkg)
                for d in deps:
                    v = node(d)
                    if u != v:
                        edges.add((u, v))
    if not edges:
        sys.exit("no apt package lists found under /var/lib/apt/lists (run apt-get update)")
    with open(sys.argv[1], "w") as out:
        out.write("%%MatrixMarket matrix coordinate pattern general\n")
        out.write("% Debian package dependency graph (Depends, Pre-Depends, Recommends)\n")
        out.write(f"{len(ids)} {len(ids)} {len(edges)}\n")
        for u, v in sorted(edges):
            out.write(f"{u + 1} {v + 1}\n")
    print(f"{sys.argv[1]}: {len(ids)} nodes, {len(edges)} edges")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes real-world graphs from Debian packages, for validating SpMM performance models.

None of them is generated: each is read from data a Debian package ships, with node ids in the
order the data comes (which is where a real graph's id locality comes from).

    debian-deps  the package dependency graph (Depends, Pre-Depends, Recommends) from apt's lists
                 (any Debian machine after `apt-get update`): ~68k packages, hubs like libc6
    wordnet      WordNet 3.0's synset graph (package wordnet-base): ~118k synsets, every pointer
                 (hypernym, meronym, antonym, derivation, ...) an edge; ids in file order
    gcide        the Collaborative International Dictionary of English (package dict-gcide,
                 Webster's 1913 + WordNet): an edge from each headword to every headword its entry
                 uses; ids in alphabetical order

    python3 apps/dype-profile/real_graphs.py wordnet /tmp/wordnet.mtx
    dype-profile validate configs/perfmodels/<device model>.json --graph /tmp/wordnet.mtx

Output is Matrix Market (pattern, general); dype's reader symmetrises it (A + A^T).
"""
import glob
import gzip
import lzma
import os
import re
import subprocess
import sys


def write_mtx(path, n, edges, comment):
    with open(path, "w") as out:
        out.write("%%MatrixMarket matrix coordinate pattern general\n")
        out.write(f"% {comment}\n")
        out.write(f"{n} {n} {len(edges)}\n")
        for u, v in sorted(edges):
            out.write(f"{u + 1} {v + 1}\n")
    print(f"{path}: {n} nodes, {len(edges)} edges ({comment})")


def apt_package_lists():
    for path in sorted(glob.glob("/var/lib/apt/lists/*_main_binary-amd64_Packages*")):
        if path.endswith(".lz4"):
            yield subprocess.run(["lz4", "-dc", path], check=True, capture_output=True).stdout.decode(
                "utf-8", "replace")
        elif path.endswith(".gz"):
            yield gzip.open(path, "rt", errors="replace").read()
        elif path.endswith(".xz"):
            yield lzma.open(path, "rt", errors="replace").read()
        else:
            yield open(path, errors="replace").read()


def debian_deps(out):
    ids, edges = {}, set()

    def node(name):
        return ids.setdefault(name, len(ids))

    field = re.compile(r"^(Package|Depends|Pre-Depends|Recommends):\s*(.*)$")
    for text in apt_package_lists():
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
    write_mtx(out, len(ids), edges, "Debian package dependency graph (Depends, Pre-Depends, Recommends)")


WORDNET = "/usr/share/wordnet"


def wordnet(out):
    files = [os.path.join(WORDNET, f"data.{pos}") for pos in ("noun", "verb", "adj", "adv")]
    if not all(os.path.exists(f) for f in files):
        sys.exit(f"WordNet data not found under {WORDNET} (apt-get install wordnet-base)")
    ids, edges = {}, set()

    def node(pos, offset):
        pos = "a" if pos == "s" else pos  # satellite adjectives share the adjective file
        return ids.setdefault((pos, offset), len(ids))

    for path in files:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("  "):
                    continue  # licence header
                fields = line.split("|", 1)[0].split()
                offset, pos = fields[0], fields[2]
                u = node(pos, offset)
                words = int(fields[3], 16)
                i = 4 + 2 * words
                for _ in range(int(fields[i])):
                    v = node(fields[i + 3], fields[i + 2])
                    if u != v:
                        edges.add((u, v))
                    i += 4
    write_mtx(out, len(ids), edges, "WordNet 3.0 synset pointers (wordnet-base)")


GCIDE = "/usr/share/dictd"
WORD = re.compile(r"[a-z][a-z'-]*[a-z]|[a-z]")
TAG = re.compile(r"<[^>]*>")


def b64(s):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    v = 0
    for c in s:
        v = v * 64 + alphabet.index(c)
    return v


def gcide(out):
    index, data = os.path.join(GCIDE, "gcide.index"), os.path.join(GCIDE, "gcide.dict.dz")
    if not (os.path.exists(index) and os.path.exists(data)):
        sys.exit(f"GCIDE not found under {GCIDE} (apt-get install dict-gcide)")
    text = gzip.open(data, "rb").read()  # dictzip is gzip with a random-access table
    entries = []
    for line in open(index, encoding="utf-8", errors="replace"):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3 or parts[0].startswith("00-"):
            continue
        entries.append((parts[0].lower(), b64(parts[1]), b64(parts[2])))
    ids = {}
    for word, _, _ in entries:
        ids.setdefault(word, len(ids))
    edges = set()
    for word, off, length in entries:
        u = ids[word]
        body = TAG.sub(" ", text[off:off + length].decode("utf-8", "replace")).lower()
        for w in set(WORD.findall(body)):
            v = ids.get(w)
            if v is not None and v != u:
                edges.add((u, v))
    write_mtx(out, len(ids), edges, "GCIDE headword -> headwords its entry uses (dict-gcide)")


SOURCES = {"debian-deps": debian_deps, "wordnet": wordnet, "gcide": gcide}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SOURCES:
        sys.exit("usage: real_graphs.py {" + "|".join(SOURCES) + "} OUT.mtx")
    SOURCES[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Relabels the nodes of a bench graph file (bench/graph_file.h's format) for gather locality, to
measure how much of a graph kernel's time is the scattered gathers of random node numbering.

  python3 bench/graph_relabel.py IN.bin OUT.bin --order morton|rcm|bfs|random

The graph is the same graph (isomorphic: node k of OUT is node order[k] of IN, positions carried
along, each row's sources ascending again); only the numbering changes.
  morton  the Z-order of the positions on a 2^10 grid per axis (needs the positions)
  rcm     reverse Cuthill-McKee on the structure alone (scipy), else bfs
  bfs     breadth-first from node 0 on the structure alone, neighbours in file order
  random  a random permutation (seed 0): the worst case, for reference
"""
import argparse
import struct
import sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        n, nnz = struct.unpack("<qq", f.read(16))
        pos = np.frombuffer(f.read(12 * n), dtype="<f4").reshape(n, 3)
        rp = np.frombuffer(f.read(8 * (n + 1)), dtype="<i8")
        ci = np.frombuffer(f.read(4 * nnz), dtype="<i4")
    return n, nnz, pos, rp, ci


def morton(pos):
    q = np.clip((pos * 1024).astype(np.int64), 0, 1023)
    code = np.zeros(len(pos), dtype=np.int64)
    for b in range(10):
        for d in range(3):
            code |= ((q[:, d] >> b) & 1) << (3 * b + d)
    return np.argsort(code, kind="stable")


def bfs(n, rp, ci):
    seen = np.zeros(n, dtype=bool)
    order = np.empty(n, dtype=np.int64)
    k = 0
    for s in range(n):
        if seen[s]:
            continue
        seen[s] = True
        order[k] = s
        head, k = k, k + 1
        while head < k:
            v = order[head]
            head += 1
            nb = ci[rp[v]:rp[v + 1]]
            nb = nb[~seen[nb]]
            seen[nb] = True
            order[k:k + len(nb)] = nb
            k += len(nb)
    return order


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--order", default="morton", choices=["morton", "rcm", "bfs", "random"])
    a = ap.parse_args()
    n, nnz, pos, rp, ci = read(a.inp)
    if a.order == "morton":
        order = morton(pos)
    elif a.order == "random":
        order = np.random.default_rng(0).permutation(n)
    elif a.order == "rcm":
        try:
            import scipy.sparse as sp
            from scipy.sparse.csgraph import reverse_cuthill_mckee

            m = sp.csr_matrix((np.ones(nnz, dtype=np.int8), ci, rp), shape=(n, n))
            order = np.asarray(reverse_cuthill_mckee(m, symmetric_mode=True), dtype=np.int64)
        except ImportError:
            print("graph_relabel: no scipy, bfs instead", file=sys.stderr)
            order = bfs(n, rp, ci)
    else:
        order = bfs(n, rp, ci)
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.arange(n)
    deg = np.diff(rp)[order]
    nrp = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=nrp[1:])
    rows = np.repeat(np.arange(n), deg)  # new row of each new edge slot
    old = np.concatenate([ci[rp[i]:rp[i + 1]] for i in order]) if n else ci
    cols = inv[old]
    key = rows * n + cols
    cols = cols[np.argsort(key, kind="stable")]
    with open(a.out, "wb") as f:
        f.write(struct.pack("<qq", n, nnz))
        f.write(np.ascontiguousarray(pos[order], dtype="<f4").tobytes())
        f.write(nrp.astype("<i8").tobytes())
        f.write(cols.astype("<i4").tobytes())
    span = np.abs(cols - rows[np.argsort(key, kind="stable")]) if nnz else np.zeros(1)
    print(f"relabel {a.order}: n {n}, nnz {nnz}, median |i - j| {np.median(span):.0f} (was "
          f"{np.median(np.abs(ci - np.repeat(np.arange(n), np.diff(rp)))):.0f})")


if __name__ == "__main__":
    main()

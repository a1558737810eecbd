#!/usr/bin/env python3
"""PyTorch baseline of one edge-MLP attention (tg_edge_attention) forward + backward; bench/bench_edge_ops.c
is the tiga side on the same graphs.

  python3 bench/edge_attention_torch.py [--sizes 100k,400k] [--no-compile] [--dump DIR] [--device cuda|cpu]
  python3 bench/edge_attention_torch.py --device cpu --sizes 2k --dump /tmp/ea      small run without a GPU

The op, for every edge e = (j -> i) of a radius graph (plain torch: gather by edge index, no PyG):
  in_e  = [pos_j - pos_i | x_j | x_i]                        [E, 3 + 2 f_in]
  s_e   = leaky_relu(in_e W1 + b1, 0.2) W2 + b2              [E, H]
  a_e   = softmax of s over the edges into i, per head       (segment max by scatter_reduce amax,
                                                              exp, segment sum by index_add)
  out_i = sum_e a_e,h v_j,h  with v = x viewed [N, H, f_in / H]
Configs (f_in, hidden) = (8, 16), (64, 64); H = 1, 4; f32; eager and torch.compile (dynamic=False).
Grads to pos, x, W1, b1, W2, b2 with a fixed random output gradient.

Graphs: bench/graph_torch.py's (imported: the same points, cutoffs and brute-force builder, checked
against its expected edge counts): 100k nodes / cutoff 0.035 (1,728,064 edges, mean degree 17.3),
400k / 0.022 (6,960,242, 17.4), 2k / 0.13 for CPU runs.
--dump DIR writes, per size, DIR/radius_<size>.bin in graph_torch.py's --save-graph format (what
bench_graph_ops and bench_edge_ops read: int64 n, int64 nnz, f32 pos[n*3], int64 row_ptr[n+1],
int32 col[nnz]) and, for the 2k size only (small files), DIR/edge_2k_f<f_in>_h<hidden>_H<H>.bin,
the inputs and PyTorch's results of each config for bench_edge_ops --check (layout in
write_fixture). The timed sizes use random features on both sides (timing does not depend on them).

Timing: graph_torch.py's Timer (CUDA events around forward + backward after 5 warm-up steps, median
of 20; the leaves' .grad set to None outside the events). Peak: torch.cuda.max_memory_allocated()
minus torch.cuda.memory_allocated() before one step, peak stats reset first. CPU: wall clock, no peak.
Checks (a FAIL line and exit 1): graph as graph_torch checks it; compiled equals eager (outputs and
gradients, 1e-4); the softmax rows sum to 1. A table and one JSON line on stdout.
ANCHORS.md ("Graph anchors re-measured") has the figures we were given for this workload.
"""
import argparse
import json
import math
import os
import struct
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_torch as gt  # noqa: E402  (the graph builder and timer shared with the other benches)

CONFIGS = [(1, 8, 16), (1, 64, 64), (4, 8, 16), (4, 64, 64)]  # (H, f_in, hidden)


def segment_softmax(torch, s, row, n):
    """softmax of s [E, H] over the edges that share a destination row."""
    idx = row.unsqueeze(1).expand_as(s)
    mx = torch.full((n, s.shape[1]), -math.inf, device=s.device, dtype=s.dtype)
    mx = mx.scatter_reduce(0, idx, s, reduce="amax", include_self=True)
    e = (s - mx.index_select(0, row)).exp()
    den = torch.zeros((n, s.shape[1]), device=s.device, dtype=s.dtype).index_add(0, row, e)
    return e / den.index_select(0, row)


def edge_attention(torch, pos, x_src, x_dst, v, w1, b1, w2, b2, row, col, n, slope=0.2):
    """tg_edge_attention's math (no edge features): v [N, H, F] -> [N, H, F]."""
    F = torch.nn.functional
    e = torch.cat([pos.index_select(0, col) - pos.index_select(0, row), x_src.index_select(0, col),
                   x_dst.index_select(0, row)], dim=1)
    s = F.leaky_relu(e @ w1 + b1, slope) @ w2 + b2  # [E, H]
    a = segment_softmax(torch, s, row, n)
    return torch.zeros_like(v).index_add(0, row, a.unsqueeze(-1) * v.index_select(0, col))


def op(torch, heads):
    def f(pos, x, w1, b1, w2, b2, row, col, n):
        return edge_attention(torch, pos, x, x, x.view(n, heads, -1), w1, b1, w2, b2, row, col, n).reshape(n, -1)

    return f


def make_inputs(torch, n, fin, hid, H, pos, dev, seed=3):
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dev)

    x = rnd(n, fin).requires_grad_(True)
    p = pos.clone().requires_grad_(True)
    w1 = rnd(3 + 2 * fin, hid, scale=1 / math.sqrt(3 + 2 * fin)).requires_grad_(True)
    b1 = rnd(hid, scale=0.1).requires_grad_(True)
    w2 = rnd(hid, H, scale=1 / math.sqrt(hid)).requires_grad_(True)
    b2 = rnd(H, scale=0.1).requires_grad_(True)
    go = rnd(n, fin)
    return p, x, w1, b1, w2, b2, go


def write_fixture(path, n, nnz, fin, hid, H, args, go, results):
    """int64 n, nnz, f_in, hidden, H; then f32: x [n, f_in], W1 [3+2f_in, hidden], b1 [hidden],
    W2 [hidden, H], b2 [H], grad_out [n, f_in] (= [n, H, f_in/H]), out [n, f_in], and the gradients of
    pos [n, 3], x, W1, b1, W2, b2. Positions and graph: radius_2k.bin beside it."""
    p, x, w1, b1, w2, b2 = args
    with open(path, "wb") as f:
        f.write(struct.pack("<qqqqq", n, nnz, fin, hid, H))
        for t in (x, w1, b1, w2, b2, go, *results):
            f.write(t.detach().float().contiguous().cpu().numpy().astype("<f4").tobytes())
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sizes", default="100k,400k", help="comma list of " + ",".join(gt.SIZES))
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--dump", metavar="DIR", help="write the graphs (and the 2k check fixtures) for bench_edge_ops")
    ap.add_argument("--warmup", type=int, help="warm-up steps (default 5 on cuda, 1 on cpu)")
    ap.add_argument("--reps", type=int, help="timed steps (default 20 on cuda, 3 on cpu)")
    a = ap.parse_args(argv)
    cuda = a.device == "cuda"
    a.warmup = a.warmup if a.warmup is not None else (5 if cuda else 1)
    a.reps = a.reps if a.reps is not None else (20 if cuda else 3)
    sizes = a.sizes.split(",")
    for s in sizes:
        if s not in gt.SIZES:
            ap.error(f"unknown size {s}")
    if a.dump and "2k" not in sizes:
        sizes = ["2k"] + sizes  # the check fixtures

    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)
    if cuda and not torch.cuda.is_available():
        print("FAIL: --device cuda but no CUDA device (use --device cpu --sizes 2k)")
        return 2
    dev = a.device
    name = torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)"
    print(f"edge_attention_torch: torch {torch.__version__}, {name}", flush=True)
    timer = gt.Timer(torch, dev, a.warmup, a.reps)
    rows = []

    for size in sizes:
        n, cutoff = gt.SIZES[size]
        pos_np = gt.make_points(n)
        pos = torch.from_numpy(pos_np).to(dev)
        row_ptr, row, col = gt.radius_graph(torch, pos, cutoff, (1 << 27) if cuda else (1 << 24))
        E = row.numel()
        print(f"graph {size}: {n} nodes, cutoff {cutoff}, {E} edges (mean degree {E / n:.2f})", flush=True)
        gt.check_graph(torch, size, n, row_ptr, row, col)
        s = torch.randn(E, 4, device=dev)
        tot = torch.zeros(n, 4, device=dev).index_add(0, row, segment_softmax(torch, s, row, n))
        has = torch.bincount(row, minlength=n) > 0
        if not (tot[has] - 1).abs().max().item() < 1e-5:
            gt.fail(f"segment softmax rows do not sum to 1 ({size})")
        if a.dump:
            print("wrote", gt.save_graph(a.dump, size, pos_np, row_ptr, col), flush=True)
        fixture_only = a.dump and size == "2k" and size not in a.sizes.split(",")
        for H, fin, hid in CONFIGS:
            f = op(torch, H)
            p, x, w1, b1, w2, b2, go = make_inputs(torch, n, fin, hid, H, pos, dev)
            args = (p, x, w1, b1, w2, b2, row, col, n)
            leaves = [p, x, w1, b1, w2, b2]
            label = f"edge-MLP attention H={H} f_in={fin} hidden={hid}"
            if a.dump and size == "2k":
                want = gt.grads_of(torch, f, args, go)
                path = os.path.join(a.dump, f"edge_2k_f{fin}_h{hid}_H{H}.bin")
                print("wrote", write_fixture(path, n, E, fin, hid, H, leaves, go, want), flush=True)
                if fixture_only:
                    continue
            for mode in ["eager"] + ([] if a.no_compile else ["compile"]):
                try:
                    g = f
                    if mode == "compile":
                        torch._dynamo.reset()
                        g = torch.compile(f, dynamic=False)
                        t0 = time.perf_counter()
                        got = gt.grads_of(torch, g, args, go)
                        print(f"  compiled {label} {size} in {time.perf_counter() - t0:.1f} s", flush=True)
                        want = gt.grads_of(torch, f, args, go)
                        # d/d b2 is 0 up to rounding (softmax is shift-invariant): left out
                        gt.compare(f"{label} compile vs eager {size}", got[:-1], want[:-1], 1e-4)
                        del got, want
                    ms, pk = timer.run(gt.fwd_bwd(g, args, go), leaves)
                except torch.cuda.OutOfMemoryError:
                    ms, pk = float("nan"), None
                    print(f"  {label} {mode} {size}: out of memory", flush=True)
                rows.append(dict(size=size, nodes=n, edges=E, H=H, f_in=fin, hidden=hid, mode=mode, ms=ms,
                                 peak_mib=pk))
                pks = "-" if pk is None else f"{pk:.0f}"
                print(f"  {size:>5} {label} {mode}: {ms:.3f} ms, peak {pks} MiB", flush=True)
                if cuda:
                    torch.cuda.empty_cache()
        del row_ptr, row, col, pos

    timed = [s for s in sizes if not (a.dump and s == "2k" and s not in a.sizes.split(","))]
    print("\n| edge-MLP attention fwd+bwd (PyTorch, f32) | mode | " +
          " | ".join(f"{s} ms | {s} peak MiB" for s in timed) + " |")
    print("|---|---|" + "---|---|" * len(timed))
    for H, fin, hid in CONFIGS:
        for mode in ("eager", "compile"):
            cells = []
            for s in timed:
                r = [r for r in rows if (r["size"], r["H"], r["f_in"], r["hidden"], r["mode"]) == (s, H, fin, hid, mode)]
                if r:
                    cells += [f"{r[0]['ms']:.3f}", "-" if r[0]["peak_mib"] is None else f"{r[0]['peak_mib']:.0f}"]
            if cells:
                print(f"| H={H} f_in={fin} hidden={hid} | {mode} | " + " | ".join(cells) + " |")
    print(json.dumps({"bench": "edge_attention_torch", "torch": torch.__version__, "device": name, "rows": rows,
                      "fails": gt.FAILS}))
    print(f"edge_attention_torch: {len(rows)} rows, {len(gt.FAILS)} failed checks")
    return 1 if gt.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())

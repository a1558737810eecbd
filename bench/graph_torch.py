#!/usr/bin/env python3
"""PyTorch / PyG baselines for tiga's graph-attention benches (docs: ANCHORS.md "Graph anchors re-measured").

  python3 bench/graph_torch.py [--sizes 100k,400k] [--only graph,a,b,c,d] [--no-compile]
                               [--save-graph DIR] [--device cuda|cpu]
  python3 bench/graph_torch.py --device cpu --sizes 2k         small proof run without a GPU

Graphs: n points uniform in the unit cube, pos = numpy default_rng(0).random((n, 3)) rounded to
float32; edge i <- j for every j != i with |pos_i - pos_j|^2 < cutoff^2, the squared distance computed
in float64 from the float32 coordinates (brute force on the device, in row chunks). CSR by destination
row i with the sources j ascending in each row. Every such graph is symmetric; no self loops.
  2k: cutoff 0.13 (31,776 edges)   100k: 0.035 (1,728,064)   400k: 0.022 (6,960,242)
(edge counts checked against a k-d tree; the anchors' 1,725,617 / 6,969,512 came from other points.)

Workloads, f32 unless said, all forward + backward with a fixed random output gradient:
  a    PyG GATConv(64 -> 4 x 16, heads=4, add_self_loops=False); grads to x and the conv's parameters.
  b    CSR dot-product attention: s_e = <q_i, k_j> / sqrt(D) per head, alpha = PyG softmax over the
       edges into i, out_i = sum_e alpha_e v_j (index_add). H=4 D=16 f32; H=8 D=64 f32 and bf16.
       Grads to q, k, v.
  c    edge-MLP attention: s_e = W2^T leaky_relu(W1^T [pos_j - pos_i || x_j || x_i] + b1, 0.2) + b2,
       alpha = PyG softmax over the edges into i, out_i = sum_e alpha_e v_j with v = x (H = 1) or x
       viewed as [N, 4, f_in / 4] (H = 4, W2 has 4 outputs). (f_in, hidden) = (8, 16) and (64, 64),
       eager and torch.compile. Grads to x, pos, W1, b1, W2, b2.
  d    point-cloud training step: two edge-MLP attention layers (H = 4, f 64, hidden 64) each followed
       by a linear update with a residual, a linear head, MSE to a random target, one Adam step.
  graph  the brute-force radius-graph build itself (one run, not a median).

Timing: CUDA events around forward + backward (the .grad of every leaf set to None before each step,
outside the events), 5 warm-up steps, median of 20. Peak: torch.cuda.max_memory_allocated() minus
torch.cuda.memory_allocated() before one plain step (peak stats reset first). On the CPU: wall clock,
no peak. Checks (a FAIL line and exit 1): graph symmetric / sorted / loop-free with the expected
edge count; compiled equals eager (outputs and gradients); bf16 near f32; softmax rows sum to 1.
Table on stdout; CSV in $OUT/graph_torch.csv when OUT is set.
"""
import argparse
import math
import os
import statistics
import struct
import sys
import time
import warnings

# "100k-x4": the 100k points with the cutoff scaled by 4^(1/3), so about 4x the edges at the same N
# (issue 14's peak-memory growth at 4x E)
SIZES = {"2k": (2_000, 0.13), "100k": (100_000, 0.035), "400k": (400_000, 0.022), "100k-x4": (100_000, 0.035 * 4 ** (1 / 3))}
EXPECTED_EDGES = {"2k": 31_776, "100k": 1_728_064, "400k": 6_960_242}
FAILS = []
BF16_TOL = 1e-1  # max |bf16 - f32| / max |f32| per output / gradient array


def fail(msg):
    print("FAIL " + msg, flush=True)
    FAILS.append(msg)


# ----------------------------------------------------------------------------------------------
# graph


def make_points(n):
    import numpy as np

    return np.random.default_rng(0).random((n, 3)).astype(np.float32)


def radius_graph(torch, pos, cutoff, elems):
    """CSR (row_ptr int64 [n+1], row int64 [E], col int64 [E]) of i <- j, j != i, |p_i - p_j| < cutoff,
    squared distances in float64, `elems` float64 elements per chunk of rows."""
    n = pos.shape[0]
    p = pos.double()
    r2 = float(cutoff) * float(cutoff)
    chunk = max(1, min(n, elems // n))
    rows, cols = [], []
    for s in range(0, n, chunk):
        q = p[s:s + chunk]
        d2 = (q[:, None, 0] - p[None, :, 0]).square_()
        d2 += (q[:, None, 1] - p[None, :, 1]).square_()
        d2 += (q[:, None, 2] - p[None, :, 2]).square_()
        m = d2 < r2
        k = torch.arange(q.shape[0], device=p.device)
        m[k, s + k] = False
        nz = m.nonzero()  # row-major order: rows ascending, columns ascending within a row
        rows.append(nz[:, 0] + s)
        cols.append(nz[:, 1])
        del d2, m, nz
    row = torch.cat(rows)
    col = torch.cat(cols)
    row_ptr = torch.zeros(n + 1, dtype=torch.long, device=p.device)
    row_ptr[1:] = torch.bincount(row, minlength=n).cumsum(0)
    return row_ptr, row, col


def check_graph(torch, name, n, row_ptr, row, col):
    e = row.numel()
    ok = e == EXPECTED_EDGES.get(name, e)
    if not ok:
        fail(f"graph {name}: {e} edges, expected {EXPECTED_EDGES[name]}")
    if bool((row == col).any()):
        fail(f"graph {name}: self loop")
    key = row * n + col
    if e > 1 and not bool((key[1:] > key[:-1]).all()):
        fail(f"graph {name}: not sorted by (row, col) or duplicate edges")
    tkey, _ = torch.sort(col * n + row)
    if not torch.equal(tkey, key):
        fail(f"graph {name}: not symmetric")
    if int(row_ptr[-1]) != e:
        fail(f"graph {name}: row_ptr[n] != nnz")


def save_graph(directory, name, pos_np, row_ptr, col):
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"radius_{name}.bin")
    n, nnz = pos_np.shape[0], col.numel()
    with open(path, "wb") as f:  # int64 n, int64 nnz, f32 pos[n*3], int64 row_ptr[n+1], int32 col[nnz]
        f.write(struct.pack("<qq", n, nnz))
        f.write(np.ascontiguousarray(pos_np, dtype="<f4").tobytes())
        f.write(row_ptr.cpu().numpy().astype("<i8").tobytes())
        f.write(col.cpu().numpy().astype("<i4").tobytes())
    with open(path, "rb") as f:
        head = struct.unpack("<qq", f.read(16))
    size = os.path.getsize(path)
    if head != (n, nnz) or size != 16 + 12 * n + 8 * (n + 1) + 4 * nnz:
        fail(f"{path}: header {head} / size {size} do not match n {n}, nnz {nnz}")
    return path


# ----------------------------------------------------------------------------------------------
# timing


class Timer:
    def __init__(self, torch, device, warmup, reps):
        self.torch, self.cuda, self.warmup, self.reps = torch, device.startswith("cuda"), warmup, reps

    def run(self, step, leaves):
        """(median ms, peak MiB or None) of step() = forward + backward; leaves' .grad reset each time."""
        torch = self.torch

        def clear():
            for t in leaves:
                t.grad = None

        for _ in range(self.warmup):
            clear()
            step()
        times = []
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(self.reps):
                clear()
                a.record()
                step()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            clear()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        else:
            for _ in range(self.reps):
                clear()
                t0 = time.perf_counter()
                step()
                times.append((time.perf_counter() - t0) * 1e3)
            peak = None
        clear()
        return statistics.median(times), peak


def fwd_bwd(fn, args, grad_out):
    def step():
        fn(*args).backward(grad_out)

    return step


def grads_of(torch, fn, args, grad_out):
    for t in args:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            t.grad = None
    out = fn(*args)
    out.backward(grad_out)
    g = [t.grad.detach().clone() for t in args if isinstance(t, torch.Tensor) and t.requires_grad]
    for t in args:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            t.grad = None
    return [out.detach().clone()] + g


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()


def compare(label, got, want, tol):
    worst = max(rel_err(g, w) for g, w in zip(got, want))
    if not worst <= tol:  # also catches NaN
        fail(f"{label}: max rel diff {worst:.2e} > {tol:.0e} (outputs and gradients)")
    else:
        print(f"  ok {label}: max rel diff {worst:.2e} <= {tol:.0e}", flush=True)
    return worst


# ----------------------------------------------------------------------------------------------
# workloads


def dot_attention(torch, softmax):
    def f(q, k, v, row, col, n):
        s = (q[row] * k[col]).sum(-1) * (1.0 / math.sqrt(q.shape[-1]))  # [E, H]
        a = softmax(s, row, num_nodes=n)
        return torch.zeros_like(v).index_add(0, row, a.unsqueeze(-1) * v[col])

    return f


def edge_mlp_attention(torch, softmax, heads):
    F = torch.nn.functional

    def f(pos, x, w1, b1, w2, b2, row, col, n):
        e = torch.cat([pos[col] - pos[row], x[col], x[row]], dim=1)  # [E, 3 + 2 f_in]
        s = F.leaky_relu(e @ w1 + b1, 0.2) @ w2 + b2  # [E, H]
        a = softmax(s, row, num_nodes=n)
        v = x.view(n, heads, -1)
        out = torch.zeros_like(v).index_add(0, row, a.unsqueeze(-1) * v[col])
        return out.view(n, -1)

    return f


def softmax_check(torch, softmax, row, n, device):
    s = torch.randn(row.numel(), 4, device=device)
    a = softmax(s, row, num_nodes=n)
    tot = torch.zeros(n, 4, device=device).index_add(0, row, a)
    has = torch.bincount(row, minlength=n) > 0
    err = (tot[has] - 1).abs().max().item()
    if not err < 1e-5:
        fail(f"PyG softmax rows do not sum to 1 (max err {err:.2e})")


def run_size(torch, name, a, timer, emit):
    from torch_geometric.nn import GATConv
    from torch_geometric.utils import softmax

    dev = a.device
    n, cutoff = SIZES[name]
    pos_np = make_points(n)
    pos = torch.from_numpy(pos_np).to(dev)
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    row_ptr, row, col = radius_graph(torch, pos, cutoff, (1 << 27) if dev.startswith("cuda") else (1 << 24))
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
    build_ms = (time.perf_counter() - t0) * 1e3
    E = row.numel()
    print(f"graph {name}: {n} nodes, cutoff {cutoff}, {E} edges (avg degree {E / n:.1f}), "
          f"built in {build_ms:.0f} ms", flush=True)
    check_graph(torch, name, n, row_ptr, row, col)
    if "graph" in a.only:
        emit(name, n, E, "radius graph brute force (f64 distances, chunked)", "f32", "eager", build_ms, None)
    if a.save_graph:
        print("wrote", save_graph(a.save_graph, name, pos_np, row_ptr, col))
    softmax_check(torch, softmax, row, n, dev)

    def guarded(label, fn):
        try:
            fn()
        except torch.cuda.OutOfMemoryError:
            print(f"{label}: out of memory", flush=True)
            emit(name, n, E, label, "", "", float("nan"), None, "OOM")
        except Exception as ex:  # a backend failure must not hide the other rows
            fail(f"{label} {name}: {type(ex).__name__}: {ex}")
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()

    if "a" in a.only:
        def gat():
            torch.manual_seed(1)
            conv = GATConv(64, 16, heads=4, add_self_loops=False).to(dev)
            x = torch.randn(n, 64, device=dev, requires_grad=True)
            ei = torch.stack([col, row])  # source j, target i (PyG's source_to_target flow)
            go = torch.randn(n, 64, device=dev)
            ms, pk = timer.run(fwd_bwd(lambda: conv(x, ei), (), go), [x, *conv.parameters()])
            emit(name, n, E, "PyG GATConv 64->4x16 (add_self_loops=False)", "f32", "eager", ms, pk)
        guarded("GATConv", gat)

    if "b" in a.only:
        f = dot_attention(torch, softmax)
        for H, D, dt in ((4, 16, "f32"), (8, 64, "f32"), (8, 64, "bf16")):
            def dot(H=H, D=D, dt=dt):
                torch.manual_seed(2)
                dtype = torch.bfloat16 if dt == "bf16" else torch.float32
                q, k, v = (torch.randn(n, H, D, device=dev).to(dtype).requires_grad_(True) for _ in range(3))
                go = torch.randn(n, H, D, device=dev).to(dtype)
                args = (q, k, v, row, col, n)
                if dt == "bf16" and n <= 100_000:  # against f32 on the same bf16-rounded inputs
                    got = grads_of(torch, f, args, go)
                    a32 = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
                    want = grads_of(torch, f, (*a32, row, col, n), go.float())
                    compare(f"dot attention bf16 vs f32 H={H} D={D} {name}", got, want, BF16_TOL)
                    del got, want, a32
                ms, pk = timer.run(fwd_bwd(f, args, go), [q, k, v])
                emit(name, n, E, f"CSR dot-product attention H={H} D={D}", dt, "eager", ms, pk)
            guarded(f"dot attention H{H} D{D} {dt}", dot)

    if "c" in a.only:
        for H in (1, 4):
            for fin, hid in ((8, 16), (64, 64)):
                f = edge_mlp_attention(torch, softmax, H)
                modes = ["eager"] + ([] if a.no_compile else ["compile"])
                for mode in modes:
                    def mlp(H=H, fin=fin, hid=hid, mode=mode, f=f):
                        torch.manual_seed(3)
                        x = torch.randn(n, fin, device=dev, requires_grad=True)
                        p = pos.clone().requires_grad_(True)
                        w1 = (torch.randn(3 + 2 * fin, hid, device=dev) / math.sqrt(3 + 2 * fin)).requires_grad_(True)
                        b1 = torch.zeros(hid, device=dev, requires_grad=True)
                        w2 = (torch.randn(hid, H, device=dev) / math.sqrt(hid)).requires_grad_(True)
                        b2 = torch.zeros(H, device=dev, requires_grad=True)
                        go = torch.randn(n, fin, device=dev)
                        args = (p, x, w1, b1, w2, b2, row, col, n)
                        g = f
                        if mode == "compile":
                            torch._dynamo.reset()
                            g = torch.compile(f, dynamic=False)
                            t0 = time.perf_counter()
                            got = grads_of(torch, g, args, go)  # first call compiles
                            print(f"  compiled edge-MLP H={H} f_in={fin} hidden={hid} {name} in "
                                  f"{time.perf_counter() - t0:.1f} s", flush=True)
                            want = grads_of(torch, f, args, go)
                            # the last entry, d/d b2, is 0 exactly (softmax is shift-invariant): noise
                            compare(f"edge-MLP H={H} {fin}/{hid} compile vs eager {name}", got[:-1], want[:-1], 1e-4)
                            del got, want
                        ms, pk = timer.run(fwd_bwd(g, args, go), [p, x, w1, b1, w2, b2])
                        emit(name, n, E, f"edge-MLP attention H={H} f_in={fin} hidden={hid}", "f32", mode, ms, pk)
                    guarded(f"edge-MLP H={H} {fin}/{hid} {mode}", mlp)

    if "d" in a.only:
        for mode in ["eager"] + ([] if a.no_compile else ["compile"]):
            def train(mode=mode):
                step, check_loss = point_cloud_step(torch, softmax, pos, row, col, n, dev, mode)
                if check_loss is not None:
                    compare(f"point-cloud loss compile vs eager {name}", [check_loss[0]], [check_loss[1]], 1e-4)
                ms, pk = timer.run(step, [])
                emit(name, n, E, "point-cloud training step (2 edge-MLP layers H=4 f 64 hidden 64, Adam)",
                     "f32", mode, ms, pk)
            guarded(f"point-cloud step {mode}", train)
    del row_ptr, row, col, pos


def point_cloud_step(torch, softmax, pos, row, col, n, dev, mode, f=64, hidden=64, heads=4, outs=8):
    """One Adam step of: h0 = x; h_{l+1} = h_l + elu(edge_mlp_attention(pos, h_l) W_u + b_u) for two
    layers; loss = mean((h_2 W_out - target)^2). Returns (step, (compiled loss, eager loss) or None)."""
    F = torch.nn.functional
    attn = edge_mlp_attention(torch, softmax, heads)
    torch.manual_seed(4)

    def param(*shape, fan_in=None):
        t = torch.randn(*shape, device=dev) / math.sqrt(fan_in) if fan_in else torch.zeros(*shape, device=dev)
        return t.requires_grad_(True)

    layers = [dict(w1=param(3 + 2 * f, hidden, fan_in=3 + 2 * f), b1=param(hidden),
                   w2=param(hidden, heads, fan_in=hidden), b2=param(heads),
                   wu=param(f, f, fan_in=f), bu=param(f)) for _ in range(2)]
    w_out = param(f, outs, fan_in=f)
    params = [t for L in layers for t in L.values()] + [w_out]
    x = torch.randn(n, f, device=dev)
    target = torch.randn(n, outs, device=dev)

    def loss_fn(x, pos, target, row, col, *ps):
        h = x
        for i in range(2):
            w1, b1, w2, b2, wu, bu = ps[6 * i:6 * i + 6]
            h = h + F.elu(attn(pos, h, w1, b1, w2, b2, row, col, n) @ wu + bu)
        return (h @ ps[12] - target).square().mean()

    fn = loss_fn
    check = None
    if mode == "compile":
        torch._dynamo.reset()
        fn = torch.compile(loss_fn, dynamic=False)
        check = (fn(x, pos, target, row, col, *params).detach(), loss_fn(x, pos, target, row, col, *params).detach())
    opt = torch.optim.Adam(params, lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        fn(x, pos, target, row, col, *params).backward()
        opt.step()

    return step, check


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sizes", default="100k,400k", help="comma list of " + ",".join(SIZES))
    ap.add_argument("--only", default="graph,a,b,c", help="comma list of graph,a,b,c,d")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--save-graph", metavar="DIR", help="write DIR/radius_<size>.bin for the C benches")
    ap.add_argument("--warmup", type=int, help="warm-up steps (default 5 on cuda, 1 on cpu)")
    ap.add_argument("--reps", type=int, help="timed steps (default 20 on cuda, 3 on cpu)")
    a = ap.parse_args(argv)
    a.only = set(a.only.split(","))
    cuda = a.device == "cuda"
    a.warmup = a.warmup if a.warmup is not None else (5 if cuda else 1)
    a.reps = a.reps if a.reps is not None else (20 if cuda else 3)
    sizes = a.sizes.split(",")
    for s in sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s}")

    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)  # PyG's torch.jit.script at import
    import torch_geometric

    if a.device == "cuda" and not torch.cuda.is_available():
        print("FAIL: --device cuda but no CUDA device (use --device cpu --sizes 2k)")
        return 2
    dev_name = torch.cuda.get_device_name() if a.device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"graph_torch: torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, {dev_name}")
    timer = Timer(torch, a.device, a.warmup, a.reps)
    rows = []

    def emit(size, n, e, what, dtype, mode, ms, peak, note=""):
        rows.append((size, n, e, what, dtype, mode, ms, peak, note))
        pk = "-" if peak is None else f"{peak:.0f}"
        print(f"  {size:>5} {what} {dtype} {mode}: {ms:.3f} ms, peak {pk} MiB {note}", flush=True)

    for s in sizes:
        run_size(torch, s, a, timer, emit)

    print("\n| workload | dtype | mode | " + " | ".join(f"{s} ms | {s} peak MiB" for s in sizes) + " |")
    print("|---|---|---|" + "---|---|" * len(sizes))
    keys = []
    for r in rows:
        if (r[3], r[4], r[5]) not in keys:
            keys.append((r[3], r[4], r[5]))
    for k in keys:
        cells = []
        for s in sizes:
            hit = [r for r in rows if r[0] == s and (r[3], r[4], r[5]) == k]
            if hit:
                r = hit[0]
                cells += [r[8] or f"{r[6]:.3f}", "-" if r[7] is None else f"{r[7]:.0f}"]
            else:
                cells += ["", ""]
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    out = os.environ.get("OUT")
    if out:
        path = os.path.join(out, "graph_torch.csv")
        with open(path, "w") as f:
            f.write("size,nodes,edges,workload,dtype,mode,ms,peak_mib,note\n")
            for r in rows:
                pk = "" if r[7] is None else f"{r[7]:.1f}"
                f.write(f"{r[0]},{r[1]},{r[2]},\"{r[3]}\",{r[4]},{r[5]},{r[6]:.4f},{pk},{r[8]}\n")
        print("wrote", path)
    print(f"graph_torch: {len(rows)} rows, {len(FAILS)} failed checks")
    for m in FAILS:
        print("FAIL " + m)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch baseline of examples/train_pointcloud: the same two-layer edge-MLP attention model, one full
training step (forward + backward + Adam) timed, eager and torch.compile.

  python3 bench/pointcloud_torch.py [--model wide|seed] [--sizes 100k,400k] [--degree 17] [--heads H] [--no-compile]
                                   [--device cuda|cpu]
  python3 bench/pointcloud_torch.py --device cpu --sizes 512 --degree 7 --train 200     losses, no GPU

Model and data (examples/pointcloud.h has the exact statement; plain torch, no PyG):
  p [N, 3] uniform in the unit cube; cutoff r with N (4/3) pi r^3 = degree; radius graph i <- j, j != i,
  |p_i - p_j| < r (bench/graph_torch.py's brute-force builder; tiga uses <=, the same graph unless a
  distance equals r exactly); x [N, 8] standard normal; target t_i = sum_j softmax_j(-4 |p_j - p_i|^2 / r^2)
  x_j[0:3] (float64, then f32); q = p / r.
  --model seed (seed 000's layer, H 1 and Adam lr 2e-2 unless given):
      h1 = edge_attention(q, x, values x viewed [N, H, 8/H]; W1 [3+16, 64], b1, W2 [64, H], b2)   [N, 8]
      h2 = the same on h1 with its own weights;  y = [h1 | h2] Wo + bo [N, 3]
  --model wide (default; the benchmarked model since session 11; H 4 and lr 5e-3 unless given),
      layer (h: [N, d]): v = h Wv [N, H, 64/H];  a = edge_attention(q, h, v; W1 [3+2d, 64], b1, W2 [64, H], b2);
      h' = elu(a [N, 64] + h Ws + bs); two layers (d = 8, then 64), y = h Wo + bo [N, 3]
  loss = mean((y - t)^2); Adam. Gradients to p, x and every weight. Initialisation: xavier-uniform
  matrices, zero biases (not tiga's Philox stream: the same distributions, not the same numbers).
  edge_attention is bench/edge_attention_torch.py's: gather by edge index, [dq | x_j | x_i] -> Linear ->
  LeakyReLU(0.2) -> Linear -> segment softmax (scatter_reduce amax, exp, index_add) -> weighted index_add.

Timing: CUDA events around one full step (opt.zero_grad(set_to_none=True), forward, backward,
opt.step()) after 5 warm-up steps, median of 20 (CPU: wall clock, 1 + 3). Peak:
torch.cuda.max_memory_allocated() minus torch.cuda.memory_allocated() before one step (peak stats
reset first; Adam's state already exists). Checks (FAIL line, exit 1): compiled loss equals eager
(1e-4 relative); the loss falls over the timed steps. --train K: K steps trained and K with the score
network (W1, b1, W2, b2) frozen, from the same initial weights; prints both final losses (mean of the last
10) and their ratio, as train_pointcloud --check-freeze-ratio does. A table and one JSON line on stdout.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_torch as gt  # noqa: E402
from edge_attention_torch import edge_attention  # noqa: E402

F_IN, HIDDEN, KAPPA = 8, 64, 4.0
HEADS = {"seed": 1, "wide": 4}
LR = {"seed": 2e-2, "wide": 5e-3}


def parse_size(s):
    s = s.strip().lower()
    return int(float(s[:-1]) * 1000) if s.endswith("k") else int(s)


def make_data(torch, n, degree, dev, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    r = (3.0 * degree / (4.0 * math.pi * n)) ** (1.0 / 3.0)
    p = torch.rand(n, 3, generator=g).to(dev)
    x = torch.randn(n, F_IN, generator=g).to(dev)
    _, row, col = gt.radius_graph(torch, p, r, (1 << 27) if dev.startswith("cuda") else (1 << 24))
    d2 = (p.double().index_select(0, col) - p.double().index_select(0, row)).square().sum(1, keepdim=True)
    s = -KAPPA * d2 / (r * r)
    mx = torch.full((n, 1), -math.inf, device=dev, dtype=torch.float64)
    mx = mx.scatter_reduce(0, row.unsqueeze(1), s, reduce="amax", include_self=True)
    w = (s - mx.index_select(0, row)).exp()
    z = torch.zeros(n, 1, device=dev, dtype=torch.float64).index_add(0, row, w)
    t = torch.zeros(n, 3, device=dev, dtype=torch.float64).index_add(0, row, w * x.double().index_select(0, col)[:, :3])
    t = (t / z.clamp(min=1e-300)).float()
    return p, x, t, r, row, col


def make_params(torch, dev, heads, model, seed=1):
    g = torch.Generator(device="cpu").manual_seed(seed)

    def xavier(a, b):
        return ((torch.rand(a, b, generator=g) * 2 - 1) * math.sqrt(6.0 / (a + b))).to(dev)

    layers = []
    for din in (F_IN, HIDDEN if model == "wide" else F_IN):
        L = dict(w1=xavier(3 + 2 * din, HIDDEN), b1=torch.zeros(HIDDEN, device=dev), w2=xavier(HIDDEN, heads),
                 b2=torch.zeros(heads, device=dev))
        if model == "wide":
            L.update(wv=xavier(din, HIDDEN), ws=xavier(din, HIDDEN), bs=torch.zeros(HIDDEN, device=dev))
        layers.append(L)
    return layers, xavier(HIDDEN if model == "wide" else 2 * F_IN, 3), torch.zeros(3, device=dev)


def loss_fn(torch, n, r, heads, model):
    Fn = torch.nn.functional

    def seed(p, x, t, row, col, *ps):
        q = p * (1.0 / r)
        hs, h = [], x
        for l in range(2):
            w1, b1, w2, b2 = ps[4 * l:4 * l + 4]
            h = edge_attention(torch, q, h, h, h.view(n, heads, -1), w1, b1, w2, b2, row, col, n).reshape(n, -1)
            hs.append(h)
        return (torch.cat(hs, 1) @ ps[8] + ps[9] - t).square().mean()

    def f(p, x, t, row, col, *ps):
        q = p * (1.0 / r)
        h = x
        for l in range(2):
            w1, b1, w2, b2, wv, ws, bs = ps[7 * l:7 * l + 7]
            v = (h @ wv).view(n, heads, -1)
            a = edge_attention(torch, q, h, h, v, w1, b1, w2, b2, row, col, n).reshape(n, -1)
            h = Fn.elu(a + h @ ws + bs)
        return (h @ ps[14] + ps[15] - t).square().mean()

    return seed if model == "seed" else f


def build(torch, n, degree, dev, mode, heads, model, freeze=False, data=None, lr=None):
    """(step() -> loss tensor, first-call check or None, data)."""
    p, x, t, r, row, col = data or make_data(torch, n, degree, dev)
    layers, wo, bo = make_params(torch, dev, heads, model)
    ps = [L[k] for L in layers for k in ("w1", "b1", "w2", "b2", "wv", "ws", "bs") if k in L] + [wo, bo]
    score = {id(L[k]) for L in layers for k in ("w1", "b1", "w2", "b2")}
    train = [w for w in ps if not (freeze and id(w) in score)]
    for w in train:
        w.requires_grad_(True)
    p = p.clone().requires_grad_(True)
    x = x.clone().requires_grad_(True)
    f = loss_fn(torch, n, r, heads, model)
    check = None
    if mode == "compile":
        torch._dynamo.reset()
        g = torch.compile(f, dynamic=False)
        check = (g(p, x, t, row, col, *ps).item(), f(p, x, t, row, col, *ps).item())
        f = g
    opt = torch.optim.Adam(train, lr=LR[model] if lr is None else lr)

    def step():
        opt.zero_grad(set_to_none=True)
        p.grad = x.grad = None
        loss = f(p, x, t, row, col, *ps)
        loss.backward()
        opt.step()
        return loss

    return step, check, (p, x, t, r, row, col)


def time_step(torch, step, dev, warmup, reps):
    losses = []
    for _ in range(warmup):
        losses.append(step().item())
    times = []
    if dev.startswith("cuda"):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(reps):
            a.record()
            loss = step()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
            losses.append(loss.item())
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        losses.append(step().item())
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            losses.append(step().item())
            times.append((time.perf_counter() - t0) * 1e3)
        peak = None
    return statistics.median(times), peak, losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sizes", default="100k,400k", help="comma list of point counts (512, 100k, 400k, ...)")
    ap.add_argument("--degree", type=float, default=17.0, help="expected neighbours (sets the cutoff)")
    ap.add_argument("--model", default="wide", choices=["wide", "seed"], help="examples/pointcloud.h's model")
    ap.add_argument("--heads", type=int, help="attention heads H (seed: 1, dividing 8; wide: 4, dividing 64)")
    ap.add_argument("--lr", type=float, help="Adam learning rate (seed: 2e-2, wide: 5e-3)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--train", type=int, default=0, metavar="K", help="also K steps trained vs score frozen")
    ap.add_argument("--warmup", type=int, help="warm-up steps (default 5 on cuda, 1 on cpu)")
    ap.add_argument("--reps", type=int, help="timed steps (default 20 on cuda, 3 on cpu)")
    a = ap.parse_args(argv)
    cuda = a.device == "cuda"
    a.warmup = a.warmup if a.warmup is not None else (5 if cuda else 1)
    a.reps = a.reps if a.reps is not None else (20 if cuda else 3)
    a.heads = a.heads if a.heads is not None else HEADS[a.model]
    width = HIDDEN if a.model == "wide" else F_IN
    if a.heads < 1 or width % a.heads:
        ap.error(f"--heads {a.heads}: must divide {width} (--model {a.model})")

    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)
    if cuda and not torch.cuda.is_available():
        print("FAIL: --device cuda but no CUDA device (use --device cpu --sizes 512 --degree 7)")
        return 2
    dev = a.device
    name = torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)"
    print(f"pointcloud_torch: torch {torch.__version__}, {name}, model {a.model}, H {a.heads}", flush=True)
    rows, trains = [], []
    for s in a.sizes.split(","):
        n = parse_size(s)
        data = make_data(torch, n, a.degree, dev)
        E = data[4].numel()
        print(f"{n} points, cutoff {data[3]:.5f} (degree {a.degree:g}), {E} edges (mean degree {E / n:.2f})",
              flush=True)
        for mode in ["eager"] + ([] if a.no_compile else ["compile"]):
            try:
                t0 = time.perf_counter()
                step, check, _ = build(torch, n, a.degree, dev, mode, a.heads, a.model, data=data, lr=a.lr)
                if check is not None:
                    print(f"  compiled in {time.perf_counter() - t0:.1f} s", flush=True)
                    err = abs(check[0] - check[1]) / max(abs(check[1]), 1e-30)
                    if not err <= 1e-4:
                        gt.fail(f"{n} compiled loss {check[0]:.6g} vs eager {check[1]:.6g}")
                ms, pk, losses = time_step(torch, step, dev, a.warmup, a.reps)
                if not losses[-1] < losses[0]:
                    gt.fail(f"{n} {mode}: loss did not fall ({losses[0]:.5g} -> {losses[-1]:.5g})")
            except torch.cuda.OutOfMemoryError:
                ms, pk, losses = float("nan"), None, [float("nan")]
                print(f"  {n} {mode}: out of memory", flush=True)
            rows.append(dict(nodes=n, edges=E, degree=a.degree, model=a.model, heads=a.heads, mode=mode, ms=ms,
                             peak_mib=pk, loss_last=losses[-1]))
            pks = "-" if pk is None else f"{pk:.0f}"
            print(f"  {n} {mode}: {ms:.3f} ms/step, peak {pks} MiB, loss {losses[0]:.4f} -> {losses[-1]:.4f}",
                  flush=True)
            del step
            if cuda:
                torch.cuda.empty_cache()
        if a.train > 0:
            final = []
            for freeze in (False, True):
                step, _, _ = build(torch, n, a.degree, dev, "eager", a.heads, a.model, freeze=freeze, data=data,
                                   lr=a.lr)
                ls = [step().item() for _ in range(a.train)]
                k = min(10, len(ls))
                final.append(sum(ls[-k:]) / k)
                print(f"  {n} train {a.train} steps{' (score frozen)' if freeze else ''}: loss {ls[0]:.6f} -> "
                      f"{final[-1]:.6f} (mean of the last {k})", flush=True)
            trains.append(dict(nodes=n, steps=a.train, trained=final[0], frozen=final[1], ratio=final[1] / final[0]))
            print(f"  freeze ratio: {final[1]:.6f} / {final[0]:.6f} = {final[1] / final[0]:.2f}", flush=True)
        del data

    print("\n| point-cloud training step (PyTorch, f32, Adam) | mode | ms/step | peak MiB |")
    print("|---|---|---|---|")
    for r in rows:
        pk = "-" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}"
        print(f"| N {r['nodes']} E {r['edges']} | {r['mode']} | {r['ms']:.3f} | {pk} |")
    print(json.dumps({"bench": "pointcloud_torch", "torch": torch.__version__, "device": name, "rows": rows,
                      "train": trains, "fails": gt.FAILS}))
    print(f"pointcloud_torch: {len(rows)} rows, {len(gt.FAILS)} failed checks")
    return 1 if gt.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())

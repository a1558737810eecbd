#!/usr/bin/env python3
"""PyG's GAT on Cora (Velickovic et al. 2018; PyG examples/gat.py), the baseline of examples/train_gat.c.

  python3 bench/gat_torch.py [--seeds 10] [--device cuda|cpu] [--dtype float32] [--csv curves.csv]

Protocol (frozen; the C side follows it):
  data   examples/data/cora: x dense [2708, 1433] binary, row-normalised (x / x.sum(1), a row without
         features stays 0), edges in both directions (10556), the file's train/val/test split.
  model  dropout(x, 0.6) -> GATConv(1433, 8, heads=8, dropout=0.6) -> ELU -> dropout(0.6)
         -> GATConv(64, 7, heads=1, concat=False, dropout=0.6); GATConv adds self loops, has a bias,
         and drops attention coefficients after the softmax (p = 0.6, training only).
  loss   cross-entropy (mean) on the 140 train nodes.
  optim  torch.optim.Adam(lr=0.005, weight_decay=5e-4) on all parameters (coupled L2: the decay is
         added to the gradient before the moments).
  epoch  one training step, then an evaluation with dropout off: val loss, val acc, test acc.
  stop   early stopping on val loss with patience 100 (stop once 100 consecutive epochs have not
         lowered the best val loss), at most 1000 epochs. Reported test accuracy = test acc at the
         epoch of the lowest val loss.
  seeds  0..N-1: torch.manual_seed(seed) before the model is built (on the CPU, then moved), so the
         initial weights do not depend on the device; dropout masks come from the device's generator.

Timing: median, over all training steps of all seeds except the first 10 steps of each seed, of the
wall-clock time of one training step = zero_grad + forward + loss + backward + optimizer.step(), with
torch.cuda.synchronize() before reading the clock at the start and at the end of each step (on the
CPU no synchronisation is needed). Evaluation is outside the timed region.
"""
import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORA_DIR = os.path.join(HERE, "..", "examples", "data", "cora")

P_DROP = 0.6
LR = 0.005
WEIGHT_DECAY = 5e-4
PATIENCE = 100
MAX_EPOCHS = 1000
TIMING_SKIP = 10


def _data_lines(path):
    with open(path) as f:
        return [l for l in f if l.strip() and not l.startswith("#")]


def load_cora(directory=CORA_DIR):
    """Cora as plain Python lists: (n, f, c, labels, splits, features per node, undirected edges)."""
    lines = _data_lines(os.path.join(directory, "cora.nodes"))
    n, f, c = map(int, lines[0].split())
    labels, splits, feats = [], [], []
    for line in lines[1:n + 1]:
        t = list(map(int, line.split()))
        assert len(t) == 3 + t[2], "cora.nodes: count does not match the feature list"
        labels.append(t[0])
        splits.append(t[1])
        feats.append(t[3:])
    assert len(labels) == n
    lines = _data_lines(os.path.join(directory, "cora.edges"))
    m = int(lines[0])
    edges = [tuple(map(int, l.split())) for l in lines[1:m + 1]]
    assert len(edges) == m
    return n, f, c, labels, splits, feats, edges


def cora_tensors(torch, dtype=None, device="cpu", directory=CORA_DIR):
    """x [N, F] row-normalised, edge_index [2, 2M] (row 0 = source j, row 1 = target i, both directions,
    sorted by (source, target) like PyG's to_undirected), y [N], and the train/val/test index tensors."""
    dtype = dtype or torch.float32
    n, f, c, labels, splits, feats, edges = load_cora(directory)
    x = torch.zeros(n, f, dtype=torch.float64)
    for i, fi in enumerate(feats):
        if fi:
            x[i, fi] = 1.0
    x = x / x.sum(1, keepdim=True).clamp(min=1.0)  # rows without features stay 0
    pairs = sorted(set(edges) | {(b, a) for a, b in edges})
    edge_index = torch.tensor(pairs, dtype=torch.long).t().contiguous()
    y = torch.tensor(labels, dtype=torch.long)
    s = torch.tensor(splits, dtype=torch.long)
    idx = [torch.nonzero(s == k).flatten().to(device) for k in (0, 1, 2)]
    return (x.to(dtype=dtype, device=device), edge_index.to(device), y.to(device), *idx, c)


def build_model(torch, n_features, n_classes, p=P_DROP):
    from torch_geometric.nn import GATConv

    class GAT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = p
            self.conv1 = GATConv(n_features, 8, heads=8, dropout=p)
            self.conv2 = GATConv(8 * 8, n_classes, heads=1, concat=False, dropout=p)

        def forward(self, x, edge_index):
            F = torch.nn.functional
            x = F.dropout(x, p=self.p, training=self.training)
            x = F.elu(self.conv1(x, edge_index))
            x = F.dropout(x, p=self.p, training=self.training)
            return self.conv2(x, edge_index)

    return GAT()


def run_seed(torch, seed, data, device, dtype, curves=None):
    F = torch.nn.functional
    x, ei, y, tr, va, te, n_classes = data
    torch.manual_seed(seed)
    model = build_model(torch, x.shape[1], n_classes).to(device=device, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    cuda = device.startswith("cuda")
    best_val, best_epoch, best_test, bad = math.inf, 0, 0.0, 0
    step_ms = []
    epoch = 0
    for epoch in range(1, MAX_EPOCHS + 1):
        model.train()
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(x, ei)
        loss = F.cross_entropy(out[tr], y[tr])
        loss.backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - t0) * 1e3)

        model.eval()
        with torch.no_grad():
            out = model(x, ei)
            val_loss = F.cross_entropy(out[va], y[va]).item()
            pred = out.argmax(1)
            val_acc = (pred[va] == y[va]).double().mean().item()
            test_acc = (pred[te] == y[te]).double().mean().item()
        if curves is not None:
            curves.append((epoch, loss.item(), val_loss, val_acc, test_acc, step_ms[-1]))
        if val_loss < best_val:
            best_val, best_epoch, best_test, bad = val_loss, epoch, test_acc, 0
        else:
            bad += 1
            if bad >= PATIENCE:
                break
    return dict(seed=seed, epochs=epoch, best_epoch=best_epoch, val_loss=best_val,
                test_acc=best_test, step_ms=step_ms[TIMING_SKIP:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--csv", help="write the per-epoch curves of seed 0 here")
    ap.add_argument("--data", default=CORA_DIR, help="folder with cora.nodes / cora.edges")
    a = ap.parse_args(argv)

    import torch
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # PyG's torch.jit.script at import
    import torch_geometric

    if a.device == "cuda" and not torch.cuda.is_available():
        print("FAIL: --device cuda but torch.cuda.is_available() is False (use --device cpu)")
        return 2
    dtype = getattr(torch, a.dtype)
    data = cora_tensors(torch, dtype, a.device, a.data)
    dev_name = torch.cuda.get_device_name() if a.device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"gat_torch: torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, "
          f"{dev_name}, {a.dtype}; Cora {data[0].shape[0]} nodes, {data[1].shape[1]} directed edges, "
          f"train/val/test {len(data[3])}/{len(data[4])}/{len(data[5])}")

    results, curves = [], []
    for seed in range(a.seeds):
        r = run_seed(torch, seed, data, a.device, dtype, curves if seed == 0 else None)
        results.append(r)
        print(f"seed {seed}: epochs {r['epochs']}, best epoch {r['best_epoch']}, "
              f"val loss {r['val_loss']:.4f}, test acc {100 * r['test_acc']:.2f} %", flush=True)

    accs = [100 * r["test_acc"] for r in results]
    mean = statistics.fmean(accs)
    pstd = statistics.pstdev(accs)
    sstd = statistics.stdev(accs) if len(accs) > 1 else float("nan")
    epochs = statistics.fmean(r["epochs"] for r in results)
    steps = [t for r in results for t in r["step_ms"]]
    med = statistics.median(steps) if steps else float("nan")
    print(f"test acc {mean:.2f} % +- {pstd:.2f} (population std, ddof=0; sample std {sstd:.2f}) "
          f"over seeds 0..{a.seeds - 1}; mean epochs {epochs:.1f}")
    print(f"training step (fwd+bwd+Adam, synchronised, eval excluded): median {med:.3f} ms over "
          f"{len(steps)} steps (first {TIMING_SKIP} of each seed skipped)")
    print(f"RESULT gat_torch device={a.device} dtype={a.dtype} seeds={a.seeds} acc_mean={mean:.2f} "
          f"acc_pstd={pstd:.2f} acc_sstd={sstd:.2f} epochs_mean={epochs:.1f} step_ms_median={med:.3f}")

    if a.csv:
        with open(a.csv, "w") as f:
            f.write("epoch,train_loss,val_loss,val_acc,test_acc,step_ms\n")
            for c in curves:
                f.write("%d,%.6f,%.6f,%.4f,%.4f,%.4f\n" % c)
        print(f"wrote {a.csv} ({len(curves)} epochs of seed 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

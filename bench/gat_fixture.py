#!/usr/bin/env python3
"""The GAT-on-Cora test fixture: PyG's initial weights (tiga's layout), a 5-step loss trajectory and the
initial gradients, so a C test can prove that tiga's GAT computes PyG's math.

  python3 bench/gat_fixture.py            write tests/data/gat_cora_fixture.bin
  python3 bench/gat_fixture.py --check    re-read it and verify it (exit 1 and a FAIL line on mismatch)

Generation (CPU): torch.manual_seed(0); the model of bench/gat_torch.py built in float32 (PyG's init:
glorot lin/att, zero bias); the 8 arrays stored as float32 are those initial values. Then model.double(),
all dropout off (input, hidden, attention p = 0), Adam(lr 0.005, weight_decay 5e-4), float64 features.
loss[t] = training cross-entropy after t optimizer steps (t = 0..5); grad_* = d loss[0] / d param (the
loss alone: Adam's weight decay is added inside the step and is not part of these gradients);
logits_0 = the model output [2708, 7] at the initial weights. Format: tests/data/README.md.

--check (1) parses the file strictly, (2) regenerates everything with PyG and compares, (3) recomputes
loss[0..5] and the gradients from the stored arrays alone with a plain-torch GAT in tiga's layout and a
hand-written Adam: the formulas the C side implements (tests/data/README.md).
"""
import argparse
import os
import struct
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gat_torch  # noqa: E402

DEFAULT_OUT = os.path.join(HERE, "..", "tests", "data", "gat_cora_fixture.bin")
MAGIC = b"TGFX0001"
STEPS = 5
PARAMS = ["w1", "a_src1", "a_dst1", "b1", "w2", "a_src2", "a_dst2", "b2"]
F32, F64 = 0, 1


def tiga_layout(model, grad=False):
    """PyG parameters -> tiga's: w [in, out] = lin.weight^T with column h*C + c = head h channel c (PyG
    views lin(x) as [N, H, C]); att [1, H, C] -> [H, C]; bias as is."""
    out = {}
    for k, conv in (("1", model.conv1), ("2", model.conv2)):
        H, C = conv.heads, conv.out_channels
        g = (lambda p: p.grad) if grad else (lambda p: p.data)
        out["w" + k] = g(conv.lin.weight).t().contiguous()
        out["a_src" + k] = g(conv.att_src).reshape(H, C).contiguous()
        out["a_dst" + k] = g(conv.att_dst).reshape(H, C).contiguous()
        out["b" + k] = g(conv.bias).contiguous()
    return out


def generate(torch):
    F = torch.nn.functional
    x, ei, y, tr, _, _, n_classes = gat_torch.cora_tensors(torch, torch.float64, "cpu")
    torch.manual_seed(0)
    model = gat_torch.build_model(torch, x.shape[1], n_classes)  # float32, PyG's init
    init = {k: v.clone() for k, v in tiga_layout(model).items()}
    model = model.double()
    model.p = 0.0
    model.conv1.dropout = 0.0
    model.conv2.dropout = 0.0
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=gat_torch.LR, weight_decay=gat_torch.WEIGHT_DECAY)
    losses, grads, logits0 = [], None, None
    for t in range(STEPS + 1):
        opt.zero_grad(set_to_none=True)
        out = model(x, ei)
        loss = F.cross_entropy(out[tr], y[tr])
        losses.append(loss.item())
        if t == STEPS:
            break
        loss.backward()
        if t == 0:
            logits0 = out.detach().clone()
            grads = {k: v.clone() for k, v in tiga_layout(model, grad=True).items()}
        opt.step()
    arrays = [(k, F32, init[k]) for k in PARAMS]
    arrays.append(("loss", F64, torch.tensor(losses, dtype=torch.float64)))
    arrays += [("grad_" + k, F64, grads[k]) for k in PARAMS]
    arrays.append(("logits_0", F64, logits0))
    return arrays


def write_fixture(path, arrays):
    buf = [MAGIC, struct.pack("<i", len(arrays))]
    for name, dt, t in arrays:
        nb = name.encode()
        buf.append(struct.pack("<i", len(nb)) + nb + struct.pack("<ii", dt, t.dim()))
        buf.append(struct.pack("<%dq" % t.dim(), *t.shape))
        npdt = "<f4" if dt == F32 else "<f8"
        buf.append(t.detach().cpu().contiguous().numpy().astype(npdt).tobytes())
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"".join(buf))


def read_fixture(path, torch):
    """Strict parse: returns [(name, dtype code, tensor)]; raises ValueError on any format problem."""
    import numpy as np

    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != MAGIC:
        raise ValueError("bad magic %r" % b[:8])
    (count,) = struct.unpack_from("<i", b, 8)
    off, arrays = 12, []
    for _ in range(count):
        (nl,) = struct.unpack_from("<i", b, off)
        name = b[off + 4:off + 4 + nl].decode()
        off += 4 + nl
        dt, nd = struct.unpack_from("<ii", b, off)
        off += 8
        dims = struct.unpack_from("<%dq" % nd, b, off)
        off += 8 * nd
        if dt not in (F32, F64) or nd < 0 or any(d < 0 for d in dims):
            raise ValueError("%s: bad dtype %d or dims %s" % (name, dt, dims))
        n = 1
        for d in dims:
            n *= d
        size = n * (4 if dt == F32 else 8)
        if off + size > len(b):
            raise ValueError("%s: data runs past the end of the file" % name)
        a = np.frombuffer(b, dtype="<f4" if dt == F32 else "<f8", count=n, offset=off)
        arrays.append((name, dt, torch.from_numpy(a.copy()).reshape(dims)))
        off += size
    if off != len(b):
        raise ValueError("%d trailing bytes" % (len(b) - off))
    return arrays


def reference(torch, P, steps=STEPS, dtype=None):
    """GAT from tiga-layout parameters, written from the formulas (not PyG), in dtype (float64 unless
    said): returns the losses after 0..steps hand-written Adam steps, the gradients at the start and the
    initial logits."""
    F = torch.nn.functional
    dtype = dtype or torch.float64
    n, _, _, labels, splits, feats, edges = gat_torch.load_cora()
    x = torch.zeros(n, 1433, dtype=dtype)
    for i, fi in enumerate(feats):
        x[i, fi] = 1.0
    x = x / x.sum(1, keepdim=True).clamp(min=1.0)
    y = torch.tensor(labels)
    tr = torch.tensor([i for i, s in enumerate(splits) if s == 0])
    # edge j -> i (source j, target i) both ways, then the self loop i -> i of every node
    src = torch.tensor([a for a, b in edges] + [b for a, b in edges] + list(range(n)))
    dst = torch.tensor([b for a, b in edges] + [a for a, b in edges] + list(range(n)))

    def layer(h_in, w, a_s, a_d, bias):
        H, C = a_s.shape
        h = (h_in @ w).view(n, H, C)  # head h, channel c = column h*C + c
        e_src = (h * a_s).sum(-1)  # [N, H]
        e_dst = (h * a_d).sum(-1)
        e = F.leaky_relu(e_src[src] + e_dst[dst], 0.2)  # [E, H]
        m = torch.full((n, H), -torch.inf, dtype=e.dtype).scatter_reduce(
            0, dst[:, None].expand(-1, H), e, "amax", include_self=False)
        p = torch.exp(e - m[dst])
        s = torch.zeros(n, H, dtype=e.dtype).index_add(0, dst, p)
        alpha = p / s[dst]
        out = torch.zeros(n, H, C, dtype=e.dtype).index_add(0, dst, alpha[..., None] * h[src])
        return out.reshape(n, H * C) + bias  # concat heads (H = 1 for layer 2: mean = identity)

    def loss_of(Q):
        h1 = F.elu(layer(x, Q["w1"], Q["a_src1"], Q["a_dst1"], Q["b1"]))
        logits = layer(h1, Q["w2"], Q["a_src2"], Q["a_dst2"], Q["b2"])
        return F.cross_entropy(logits[tr], y[tr]), logits

    Q = {k: P[k].to(dtype).clone().requires_grad_(True) for k in PARAMS}
    m = {k: torch.zeros_like(Q[k]) for k in PARAMS}
    v = {k: torch.zeros_like(Q[k]) for k in PARAMS}
    lr, wd, b1, b2, eps = gat_torch.LR, gat_torch.WEIGHT_DECAY, 0.9, 0.999, 1e-8
    losses, grads, logits0 = [], None, None
    for t in range(steps + 1):
        loss, logits = loss_of(Q)
        losses.append(loss.item())
        if t == 0:
            logits0 = logits.detach()
        if t == steps:
            break
        g = torch.autograd.grad(loss, [Q[k] for k in PARAMS])
        if t == 0:
            grads = {k: gi.detach().clone() for k, gi in zip(PARAMS, g)}
        with torch.no_grad():  # torch.optim.Adam, coupled L2, amsgrad off
            bc1, bc2 = 1 - b1 ** (t + 1), 1 - b2 ** (t + 1)
            for k, gi in zip(PARAMS, g):
                gi = gi + wd * Q[k]
                m[k].mul_(b1).add_(gi, alpha=1 - b1)
                v[k].mul_(b2).addcmul_(gi, gi, value=1 - b2)
                denom = v[k].sqrt() / bc2 ** 0.5 + eps
                Q[k].addcdiv_(m[k], denom, value=-lr / bc1)
    return losses, grads, logits0


def max_rel(torch, a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp(min=1e-300)).item()


def check(torch, path):
    fails = []

    def expect(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            fails.append(what)

    try:
        got = read_fixture(path, torch)
    except (OSError, ValueError, struct.error) as e:
        print("FAIL  cannot parse %s: %s" % (path, e))
        return 1
    want = generate(torch)
    names = [(n, d, tuple(t.shape)) for n, d, t in got]
    expect(names == [(n, d, tuple(t.shape)) for n, d, t in want],
           "format: %d arrays, names/dtypes/shapes %s" % (len(got), [(n, s) for n, _, s in names]))
    if fails:
        return 1
    G = {n: t for n, _, t in got}
    W = {n: t for n, _, t in want}
    expect(all(torch.equal(G[k], W[k].float()) for k in PARAMS),
           "initial float32 weights equal PyG's torch.manual_seed(0) init bit for bit")
    worst = max(max_rel(torch, G[k], W[k]) for k in G if k not in PARAMS)
    expect(worst < 1e-12, "regenerated with PyG: losses, gradients, logits within %.1e (max rel) < 1e-12" % worst)

    losses, grads, logits0 = reference(torch, G)
    dl = max(abs(a - b) for a, b in zip(losses, G["loss"].tolist()))
    expect(dl < 1e-12, "plain-formula GAT + hand Adam: |loss_t - fixture| max %.2e < 1e-12 (t = 0..5)" % dl)
    dg = max(max_rel(torch, grads[k], G["grad_" + k]) for k in PARAMS)
    expect(dg < 1e-10, "plain-formula GAT: gradients max rel diff %.2e < 1e-10" % dg)
    dz = max_rel(torch, logits0, G["logits_0"])
    expect(dz < 1e-12, "plain-formula GAT: logits_0 max rel diff %.2e < 1e-12" % dz)
    print("loss_0..5:", " ".join("%.12f" % l for l in G["loss"].tolist()))
    print("%d passed, %d failed" % (5 - len(fails), len(fails)))
    return 1 if fails else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="fixture path (default tests/data/gat_cora_fixture.bin)")
    ap.add_argument("--check", action="store_true", help="re-read the fixture and verify it")
    a = ap.parse_args(argv)
    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)  # PyG's torch.jit.script at import
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if a.check:
        return check(torch, a.out)
    arrays = generate(torch)
    write_fixture(a.out, arrays)
    print("wrote %s (%d bytes): %s" % (a.out, os.path.getsize(a.out), ", ".join(n for n, _, _ in arrays)))
    print("loss_0..5:", " ".join("%.12f" % t for t in arrays[len(PARAMS)][2].tolist()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Attention over every relation kind against NumPy, MHA against NumPy, and a gradcheck."""
import numpy as np
import pytest

import tiga


def ref_attention(q, k, v, allowed, scale=None):
    """q [B,Nq,H,D], k/v [B,Nk,Hkv,*], allowed [B or 1, Nq, Nk] bool."""
    B, Nq, H, D = q.shape
    Hkv = k.shape[2]
    scale = 1 / np.sqrt(D) if scale is None else scale
    out = np.zeros((B, Nq, H, v.shape[3]))
    for b in range(B):
        for h in range(H):
            s = scale * q[b, :, h] @ k[b, :, h // (H // Hkv)].T
            m = allowed[b if allowed.shape[0] > 1 else 0]
            s = np.where(m, s, -np.inf)
            mx = np.max(s, axis=1, keepdims=True)
            p = np.where(m, np.exp(s - np.where(np.isfinite(mx), mx, 0)), 0)
            den = p.sum(1, keepdims=True)
            p = np.divide(p, den, out=np.zeros_like(p), where=den > 0)
            out[b, :, h] = p @ v[b, :, h // (H // Hkv)]
    return out


def allowed_from_csr(rel, B=1):
    _, nq, nk, _ = rel.info()
    m = np.zeros((B, nq, nk), bool)
    for b in range(B):
        rp, ci = rel.read_csr(b)
        for i in range(nq):
            m[b, i, ci[rp[i]:rp[i + 1]]] = True
    return m


def relations(rt, rng, nq, nk):
    """(name, relation, allowed [1 or B, nq, nk]) for every kind."""
    i, j = np.arange(nq)[:, None], np.arange(nk)[None, :]
    mask = rng.random((nq, nk)) < 0.5
    mask[3] = False  # a query with no key
    rows = [sorted(set(rng.integers(0, nk, size=rng.integers(0, 4)).tolist())) for _ in range(nq)]
    rp = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    ci = np.array([c for r in rows for c in r], np.int32)
    csr_allowed = np.zeros((nq, nk), bool)
    for a, r in enumerate(rows):
        csr_allowed[a, r] = True
    yield "dense", tiga.relation_dense(rt, nq, nk), np.ones((1, nq, nk), bool)
    yield "causal", tiga.relation_causal(rt, nq, nk), (j <= i + nk - nq)[None]
    yield "mask", tiga.relation_mask(rt, mask), mask[None]
    bmask = rng.random((2, nq, nk)) < 0.6
    yield "mask_batched", tiga.relation_mask(rt, bmask), bmask
    yield "csr", tiga.relation_csr(rt, rp, ci, nk), csr_allowed[None]
    cu_q, cu_k = np.array([0, 2, nq]), np.array([0, 3, nk])
    vl = np.zeros((nq, nk), bool)
    for s in range(2):
        for a in range(cu_q[s], cu_q[s + 1]):
            lq, lk = cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s]
            for b in range(cu_k[s], cu_k[s + 1]):
                vl[a, b] = (b - cu_k[s]) <= (a - cu_q[s]) + lk - lq
    yield "varlen_causal", tiga.relation_varlen(rt, cu_q, cu_k, causal=True), vl[None]
    p1, p2 = tiga.relation_causal(rt, 2, 3), tiga.relation_dense(rt, nq - 2, nk - 3)
    cat = np.zeros((nq, nk), bool)
    cat[:2, :3] = np.arange(3)[None, :] <= np.arange(2)[:, None] + 1
    cat[2:, 3:] = True
    yield "concat", tiga.relation_concat(rt, [p1, p2]), cat[None]
    pos = rng.random((nq, 2))
    rad = tiga.relation_radius(rt, pos, 0.5, pos_src=rng.random((nk, 2)))
    yield "radius", rad, allowed_from_csr(rad)


@pytest.mark.parametrize("which", ["dense", "causal", "mask", "mask_batched", "csr", "varlen_causal", "concat",
                                   "radius"])
def test_attention_every_relation_vs_numpy(which, rng):
    rt = tiga.Runtime()
    tape = tiga.Tape(rt)
    nq, nk, H, Hkv, D = 7, 9, 4, 2, 5
    for name, rel, allowed in relations(rt, rng, nq, nk):
        if name != which:
            continue
        B = 2 if name in ("dense", "causal", "mask", "mask_batched", "csr", "radius") else 1
        q = rng.standard_normal((B, nq, H, D))
        k = rng.standard_normal((B, nk, Hkv, D))
        v = rng.standard_normal((B, nk, Hkv, 3))
        out, lse = tiga.attention(tape.input(q), tape.input(k), tape.input(v), rel, return_lse=True)
        np.testing.assert_allclose(out.numpy(), ref_attention(q, k, v, allowed), rtol=1e-10, atol=1e-12)
        assert lse.shape == (B, H, nq)
        kind, rnq, rnk, pairs = rel.info()
        assert (rnq, rnk) == (nq, nk)
        if name != "mask_batched":
            assert pairs == allowed.sum() and np.array_equal(allowed_from_csr(rel), allowed)
        out2 = tiga.attention(tape.input(q), tape.input(k), tape.input(v), rel, scale=0.3)
        np.testing.assert_allclose(out2.numpy(), ref_attention(q, k, v, allowed, 0.3), rtol=1e-10, atol=1e-12)
        return
    raise AssertionError(which)


def test_attention_gradcheck_over_a_mask(rng):
    rt = tiga.Runtime()
    mask = rng.random((4, 5)) < 0.6
    rel = tiga.relation_mask(rt, mask)

    def f(q, k, v):
        return tiga.sum(tiga.mul(tiga.attention(q, k, v, rel), tiga.tanh(q)))

    res = tiga.gradcheck(f, [rng.standard_normal((1, 4, 2, 3)), rng.standard_normal((1, 5, 2, 3)),
                             rng.standard_normal((1, 5, 2, 3))], runtime=rt)
    assert res.passed


def test_mha_vs_numpy(rng):
    tape = tiga.Tape()
    B, n, dm, H, D = 2, 5, 8, 2, 4
    x = rng.standard_normal((B, n, dm))
    ws = [rng.standard_normal(s) * 0.3 for s in [(dm, H * D), (dm, H * D), (dm, H * D), (H * D, dm)]]
    out = tiga.mha(tape.input(x), *[tape.parameter(w) for w in ws], heads_q=H, causal=True).numpy()
    q = (x @ ws[0]).reshape(B, n, H, D)
    k = (x @ ws[1]).reshape(B, n, H, D)
    v = (x @ ws[2]).reshape(B, n, H, D)
    causal = (np.arange(n)[None, :] <= np.arange(n)[:, None])[None]
    want = ref_attention(q, k, v, causal).reshape(B, n, H * D) @ ws[3]
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)

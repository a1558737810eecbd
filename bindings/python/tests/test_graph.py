"""Graph ops against NumPy, relations read back as CSR, radius graphs against brute force."""
import numpy as np
import pytest

import tiga


def edges(rel):
    rp, ci = rel.read_csr()
    dst = np.repeat(np.arange(len(rp) - 1), np.diff(rp))
    return dst, ci.astype(np.int64)


@pytest.fixture
def graph(rng):
    rt = tiga.Runtime()
    nq, nk = 6, 5
    rows = [sorted(set(rng.integers(0, nk, size=rng.integers(0, 4)).tolist())) for _ in range(nq)]
    rows[2] = []
    rp = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    ci = np.array([c for r in rows for c in r], np.int32)
    return rt, tiga.relation_csr(rt, rp, ci, nk), nq, nk


def test_gather_reduce_softmax(graph, rng):
    rt, rel, nq, nk = graph
    tape = tiga.Tape(rt)
    dst, src = edges(rel)
    E = len(dst)
    x = rng.standard_normal((nk, 3))
    xd = rng.standard_normal((nq, 3))
    np.testing.assert_array_equal(tiga.graph_gather(rel, tape.input(x)).numpy(), x[src])
    np.testing.assert_array_equal(tiga.graph_gather(rel, tape.input(xd), tiga.Side.DEST).numpy(), xd[dst])
    ev = rng.standard_normal((E, 3))
    for kind in (tiga.Reduce.SUM, tiga.Reduce.MEAN, tiga.Reduce.MAX):
        got = tiga.graph_reduce(rel, tape.input(ev), kind).numpy()
        want = np.zeros((nq, 3))
        for i in range(nq):
            sel = ev[dst == i]
            if len(sel):
                want[i] = {tiga.Reduce.SUM: sel.sum(0), tiga.Reduce.MEAN: sel.mean(0), tiga.Reduce.MAX: sel.max(0)}[kind]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    s = rng.standard_normal((E, 2))
    got = tiga.graph_softmax(rel, tape.input(s)).numpy()
    want = np.zeros_like(s)
    for i in range(nq):
        m = dst == i
        if m.any():
            e = np.exp(s[m] - s[m].max(0))
            want[m] = e / e.sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_attend_gat_displacement(graph, rng):
    rt, rel, nq, nk = graph
    tape = tiga.Tape(rt)
    dst, src = edges(rel)
    E, H, F = len(dst), 2, 3
    scores = rng.standard_normal((E, H))
    values = rng.standard_normal((nk, H, F))
    out, lse = tiga.graph_attend(rel, tape.input(scores), tape.input(values), return_lse=True)
    want = np.zeros((nq, H, F))
    want_lse = np.full((H, nq), -np.inf)
    for i in range(nq):
        m = dst == i
        if m.any():
            for h in range(H):
                e = np.exp(scores[m, h] - scores[m, h].max())
                want[i, h] = (e / e.sum()) @ values[src[m], h]
                want_lse[h, i] = np.log(np.exp(scores[m, h]).sum())
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse.numpy(), want_lse, rtol=1e-6)
    ed, es = rng.standard_normal((nq, H)), rng.standard_normal((nk, H))
    gat = tiga.gat_attention(rel, tape.input(ed), tape.input(es), tape.input(values), negative_slope=0.2).numpy()
    sc = ed[dst] + es[src]
    sc = np.where(sc > 0, sc, 0.2 * sc)
    want = np.zeros((nq, H, F))
    for i in range(nq):
        m = dst == i
        if m.any():
            for h in range(H):
                e = np.exp(sc[m, h] - sc[m, h].max())
                want[i, h] = (e / e.sum()) @ values[src[m], h]
    np.testing.assert_allclose(gat, want, rtol=1e-10, atol=1e-12)
    ps, pd = rng.standard_normal((nk, 3)), rng.standard_normal((nq, 3))
    disp = tiga.graph_displacement(rel, tape.input(ps), tape.input(pd)).numpy()
    np.testing.assert_allclose(disp, ps[src] - pd[dst])


def test_graph_gradcheck(graph, rng):
    rt, rel, nq, nk = graph
    E = rel.info()[3]
    res = tiga.gradcheck(lambda s, v: tiga.sum(tiga.tanh(tiga.graph_attend(rel, s, v))),
                         [rng.standard_normal((E, 2)), rng.standard_normal((nk, 2, 2))], runtime=rt)
    assert res.passed


def test_edge_attention(graph, rng):
    rt, rel, nq, nk = graph
    tape = tiga.Tape(rt)
    dst, src = edges(rel)
    E, H, F, hid, dim, Fs, Fd, Fe = len(src), 2, 3, 4, 2, 3, 2, 1
    ps, pd = rng.standard_normal((nk, dim)), rng.standard_normal((nq, dim))
    xs, xd = rng.standard_normal((nk, Fs)), rng.standard_normal((nq, Fd))
    fe, values = rng.standard_normal((E, Fe)), rng.standard_normal((nk, H, F))
    w1, b1 = rng.standard_normal((dim + Fs + Fd + Fe, hid)), rng.standard_normal(hid)
    w2, b2 = rng.standard_normal((hid, H)), rng.standard_normal(H)
    inp = tape.input
    out = tiga.edge_attention(rel, inp(values), inp(w1), inp(w2), pos_src=inp(ps), pos_dst=inp(pd), x_src=inp(xs),
                              x_dst=inp(xd), edge_feat=inp(fe), b1=inp(b1), b2=inp(b2), negative_slope=0.1).numpy()
    a = np.concatenate([ps[src] - pd[dst], xs[src], xd[dst], fe], axis=1) @ w1 + b1
    sc = np.where(a > 0, a, 0.1 * a) @ w2 + b2
    want = np.zeros((nq, H, F))
    for i in range(nq):
        m = dst == i
        if m.any():
            for h in range(H):
                e = np.exp(sc[m, h] - sc[m, h].max())
                want[i, h] = (e / e.sum()) @ values[src[m], h]
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
    # recompute_products is CUDA_FUSED's; the host provider takes the option and gives the same bits
    again = tiga.edge_attention(rel, inp(values), inp(w1), inp(w2), pos_src=inp(ps), pos_dst=inp(pd),
                                x_src=inp(xs), x_dst=inp(xd), edge_feat=inp(fe), b1=inp(b1), b2=inp(b2),
                                negative_slope=0.1, recompute_products=True).numpy()
    np.testing.assert_array_equal(again, out)
    res = tiga.gradcheck(lambda v, p, q, a1, a2: tiga.sum(tiga.tanh(tiga.edge_attention(
        rel, v, a1, a2, pos_src=p, pos_dst=q))), [values, ps, pd, rng.standard_normal((dim, hid)), w2], runtime=rt)
    assert res.passed


def test_radius_vs_brute_force(rng):
    rt = tiga.Runtime()
    pos = rng.random((40, 3))
    rel, perm = tiga.relation_radius(rt, pos, 0.3, return_perm=True)
    assert sorted(perm.tolist()) == list(range(40))
    d2 = ((pos[:, None, :] - pos[None, :, :]) ** 2).sum(-1)
    want = (d2 <= 0.09) & ~np.eye(40, dtype=bool)
    dst, src = edges(rel)
    got = np.zeros((40, 40), bool)
    got[dst, src] = True
    np.testing.assert_array_equal(got, want)
    loops = tiga.relation_radius(rt, pos, 0.3, self_loops=True, max_neighbors=3)
    rp, ci = loops.read_csr()
    assert np.all(np.diff(rp) <= 3)
    tape = tiga.Tape(rt)
    rv = tiga.relation_radius_value(tape.input(pos), 0.3)
    np.testing.assert_array_equal(rv.read_csr()[1], rel.read_csr()[1])
    with pytest.raises(tiga.TigaError, match="cutoff"):
        tiga.relation_radius(rt, pos, -1.0)
    bad = pos.copy()
    bad[5, 1] = np.nan
    with pytest.raises(tiga.TigaError, match="5"):
        tiga.relation_radius(rt, bad, 0.3)


def test_relation_errors():
    rt = tiga.Runtime()
    with pytest.raises(tiga.TigaError, match="col_idx|strictly|increasing|sorted"):
        tiga.relation_csr(rt, [0, 2], [1, 1], 3)
    with pytest.raises(tiga.TigaError):
        tiga.relation_varlen(rt, [0, 3, 2])
    with pytest.raises(ValueError, match="mask"):
        tiga.relation_mask(rt, np.ones(3))

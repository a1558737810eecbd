"""Values in and out in every dtype, names, parameters, modes, explain, and bad inputs: each
failure raises TigaError at once with the library's message."""
import gc

import ml_dtypes
import numpy as np
import pytest

import tiga


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64,
                                   np.uint8])
def test_round_trip_every_dtype(tape, rng, dtype):
    a = (rng.standard_normal((3, 4, 2)) * 10).astype(dtype)
    v = tape.input(a)
    assert v.shape == (3, 4, 2) and v.numel == 24 and v.ndim == 3
    assert v.numpy().dtype == np.dtype(dtype)
    np.testing.assert_array_equal(v.numpy(), a)


def test_bool_is_u8_and_scalars(tape):
    v = tape.input(np.array([True, False, True]))
    assert v.dtype == tiga.U8
    np.testing.assert_array_equal(v.numpy(), [1, 0, 1])
    s = tape.input(2.5)
    assert s.shape == () and s.item() == 2.5
    assert tape.input([1.0, 2.0], dtype="f32").dtype == tiga.F32


def test_arithmetic_and_gradients(tape, rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3,))
    x = tape.input(a, requires_grad=True)
    w = tape.parameter(b, name="w")
    y = tiga.sum((x * w + 1.0 - x) * 2.0 / 4.0)
    tape.backward(y)
    np.testing.assert_allclose(y.item(), np.sum((a * b + 1.0 - a) * 0.5))
    np.testing.assert_allclose(x.grad_numpy(), np.broadcast_to((b - 1.0) * 0.5, (4, 3)))
    np.testing.assert_allclose(w.grad_numpy(), a.sum(0) * 0.5)
    m = tape.input(rng.standard_normal((2, 4)))
    np.testing.assert_allclose((m @ x).numpy(), m.numpy() @ a)
    np.testing.assert_allclose((-x).numpy(), -a)
    tape.zero_grad()
    np.testing.assert_array_equal(w.grad_numpy(), 0)


def test_backward_with_seed(tape, rng):
    a = rng.standard_normal((2, 3))
    x = tape.input(a, requires_grad=True)
    y = tiga.tanh(x)
    g = rng.standard_normal((2, 3))
    tape.backward(y, tape.input(g))
    np.testing.assert_allclose(x.grad_numpy(), g * (1 - np.tanh(a) ** 2), rtol=1e-12)


def test_shape_ops(tape, rng):
    a = rng.standard_normal((2, 3, 4))
    x = tape.input(a)
    np.testing.assert_array_equal(tiga.reshape(x, 6, -1).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(tiga.transpose(x, 0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(tiga.slice(x, 1, 2).numpy(), a[..., 1:3])
    parts = tiga.split(x, [1, 3])
    np.testing.assert_array_equal(parts[1].numpy(), a[..., 1:])
    np.testing.assert_array_equal(tiga.concat(parts).numpy(), a)
    np.testing.assert_allclose(tiga.sum_last(x).numpy(), a.sum(-1))
    np.testing.assert_allclose(tiga.mean(x).item(), a.mean())
    np.testing.assert_allclose(tiga.softmax(x).numpy(), np.exp(a) / np.exp(a).sum(-1, keepdims=True))
    np.testing.assert_allclose(tiga.relu(x).numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(tiga.leaky_relu(x, 0.1).numpy(), np.where(a > 0, a, 0.1 * a))
    np.testing.assert_allclose(tiga.elu(x).numpy(), np.where(a > 0, a, np.expm1(a)))
    g = tiga.gelu(x).numpy()
    np.testing.assert_allclose(g, 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))), rtol=1e-12)
    np.testing.assert_array_equal(tiga.cast(x, tiga.F32).numpy(), a.astype(np.float32))
    np.testing.assert_array_equal(tiga.dropout(x, 1.0).numpy(), a)
    w, b = tape.input(np.ones(4)), tape.input(np.zeros(4))
    ln = tiga.layernorm(x, w, b, 1e-5).numpy()
    ref = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln, ref, rtol=1e-10, atol=1e-12)
    table = tape.parameter(rng.standard_normal((5, 2)))
    np.testing.assert_array_equal(tiga.embedding(table, [[4, 0], [1, 1]]).numpy(), table.numpy()[[[4, 0], [1, 1]]])
    logits = rng.standard_normal((3, 5))
    ce = tiga.cross_entropy(tape.input(logits), [0, 4, 2]).item()
    lse = np.log(np.exp(logits).sum(-1))
    np.testing.assert_allclose(ce, np.mean(lse - logits[[0, 1, 2], [0, 4, 2]]))
    ce_ign = tiga.cross_entropy(tape.input(logits), [0, -100, 2], ignore_index=-100).item()
    np.testing.assert_allclose(ce_ign, np.mean((lse - logits[[0, 1, 2], [0, 4, 2]])[[0, 2]]))
    np.testing.assert_allclose(tiga.mse(x, np.zeros_like(a)).item(), np.mean(a ** 2))


def test_parameters_names_and_modes(tape):
    p0 = tape.parameter(shape=(2, 3), dtype="f32", init=tiga.Init.normal(0, 0.02, seed=7), name="enc.w")
    p1 = tape.parameter(shape=(3,), no_weight_decay=True)
    np.testing.assert_array_equal(p0.numpy(), tiga.Init.normal(0, 0.02, seed=7).fill((2, 3)))
    np.testing.assert_array_equal(p1.numpy(), 0)
    assert [p.id for p in tape.parameters()] == [p0.id, p1.id]
    assert p0.name == "enc.w" and p1.name == "param.1"
    assert tape.parameter_named("param.1").id == p1.id
    p1.name = "enc.b"
    assert tape.parameter_named("enc.b").id == p1.id
    with pytest.raises(tiga.TigaError, match="taken by parameter"):
        p1.name = "enc.w"
    with pytest.raises(tiga.TigaError, match="no parameter named 'nope'"):
        tape.parameter_named("nope")
    with tape.no_grad():
        y = tiga.relu(p0)
        assert tape.stats()[0] == 0
    assert tape.set_grad_enabled(True) is True
    with tape.provider(tiga.HOST):
        y = tiga.relu(p0)
    assert "relu" in tape.explain() and "host" in tape.explain()
    tape.set_seed(5)
    p0.write(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(p0.numpy(), 1)
    tape.reset()
    with pytest.raises(tiga.TigaError, match="stale id"):
        y.numpy()
    assert p0.numpy().sum() == 6  # parameters survive reset
    x = tiga.Init.xavier_uniform(seed=3).fill((4, 5), "f64")
    assert x.dtype == np.float64 and np.abs(x).max() <= np.sqrt(6 / 9)


def test_errors_raise_at_once_with_the_message(tape, rng):
    x = tape.input(rng.standard_normal((2, 3)))
    w = tape.input(rng.standard_normal((4, 5)))
    with pytest.raises(tiga.TigaError, match=r"tg_linear") as e:
        tiga.linear(x, w)
    assert e.value.status == tiga.Status.TG_ERR_SHAPE and e.value.status_name == "TG_ERR_SHAPE"
    assert tape.status == tiga.Status.TG_ERR_SHAPE  # sticky until reset
    tape.reset()
    x = tape.input(rng.standard_normal((2, 3)))
    with pytest.raises(tiga.TigaError, match="broadcast|shape"):
        tiga.add(x, tape.input(np.zeros((4,))))
    tape.reset()
    x = tape.input(rng.standard_normal((2, 3)))
    with pytest.raises(ValueError, match="write of shape"):
        x.write(np.zeros(7))
    with pytest.raises(tiga.TigaError, match="TG_ERR_DTYPE|float"):
        tape.input(np.arange(3, dtype=np.int32), requires_grad=True)
    with pytest.raises(TypeError, match="no tiga dtype"):
        tape.input(np.zeros(3, np.complex64))
    with pytest.raises(ValueError, match="at most 8"):
        tape.input(np.zeros((1,) * 9))
    with pytest.raises(tiga.TigaError, match="backward"):
        tape.backward(x)  # not a scalar
    with pytest.raises(tiga.TigaError, match="no CUDA|without CUDA|device"):
        tiga.Runtime(1000)
    other = tiga.Tape()
    with pytest.raises(ValueError, match="different tapes"):
        tiga.add(x, other.input(np.zeros((2, 3))))
    with pytest.raises(tiga.TigaError):
        tiga.Value(tape, tiga.NO_ID).numpy()


def test_finalizers_in_any_order():
    """Handles dropped in every order (C reference counts keep what is still used alive)."""
    import itertools

    for order in itertools.permutations(range(4)):
        rt = tiga.Runtime()
        t = tiga.Tape(rt)
        rel = tiga.relation_dense(rt, 2, 2)
        q = t.input(np.ones((1, 2, 1, 4)))
        out = tiga.attention(q, q, q, rel)
        exported = np.from_dlpack(out)
        objs = [rt, t, rel, out]
        fins = [rt._fin, t._fin, rel._fin]
        del q, out, t, rel, rt
        for i in order:  # no reference cycles: each drop runs its finalizer at once
            objs[i] = None
        assert not any(f.alive for f in fins), "a handle outlived every Python reference"
        np.testing.assert_allclose(exported, 1.0)  # the C tape lives on for the export
        del exported
    gc.collect()
    # explicit close is idempotent and later use says so
    rt = tiga.Runtime()
    rt.close()
    rt.close()
    with pytest.raises(ValueError, match="closed"):
        rt.has_device


@pytest.mark.parametrize("sa,sb", [((3, 5, 7), (3, 5, 7)), ((3, 5, 7), (5, 7)), ((5, 7), (3, 5, 7)),
                                   ((1, 5, 7), (3, 5, 7)), ((3, 1, 7), (1, 5, 7)), ((7,), (7,)), ((4, 2, 1), (2, 1))])
def test_dot_last(tape, rng, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    x, w = tape.input(a, requires_grad=True), tape.parameter(b)
    y = tiga.dot_last(x, w)
    want = (a * b).sum(-1)
    assert y.shape == want.shape
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-14)
    g = rng.standard_normal(want.shape)
    tape.backward(y, tape.input(g))
    ga = np.broadcast_to(g[..., None] * b, np.broadcast_shapes(sa, sb))
    gb = np.broadcast_to(g[..., None] * a, np.broadcast_shapes(sa, sb))

    def down(full, shape):  # sum a broadcast gradient down to the operand's shape
        full = full.sum(axis=tuple(range(full.ndim - len(shape))))
        return full.sum(axis=tuple(d for d, n in enumerate(shape) if n == 1), keepdims=True)

    np.testing.assert_allclose(x.grad_numpy(), down(ga, sa), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(w.grad_numpy(), down(gb, sb), rtol=1e-12, atol=1e-13)
    with pytest.raises(tiga.TigaError, match="differ in the last dim"):
        tiga.dot_last(x, tape.input(np.ones(3)))

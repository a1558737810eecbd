"""An MLP trained with AdamW (and the other optimizers, clipping and gradcheck) from Python."""
import numpy as np
import pytest

import tiga


def make_mlp(tape, rng, din=2, hidden=16, dout=1):
    w1 = tape.parameter(shape=(din, hidden), dtype="f64", init=tiga.Init.xavier_uniform(seed=1), name="l1.w")
    b1 = tape.parameter(np.zeros(hidden), name="l1.b", no_weight_decay=True)
    w2 = tape.parameter(shape=(hidden, dout), dtype="f64", init=tiga.Init.xavier_uniform(seed=2), name="l2.w")
    b2 = tape.parameter(np.zeros(dout), name="l2.b", no_weight_decay=True)
    return w1, b1, w2, b2


def forward(params, x):
    w1, b1, w2, b2 = params
    return tiga.linear(tiga.tanh(tiga.linear(x, w1, b1)), w2, b2)


def test_mlp_learns_xor_with_adamw(tape, rng):
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float64)
    Y = np.array([[0], [1], [1], [0]], np.float64)
    params = make_mlp(tape, rng)
    losses = []
    for step in range(300):
        tape.zero_grad()
        loss = tiga.mse(forward(params, tape.input(X)), Y)
        tape.backward(loss)
        tape.adamw_step(lr=0.05, weight_decay=0.0)
        losses.append(loss.item())
        tape.reset()
    assert losses[0] > 0.1 and losses[-1] < 1e-3, (losses[0], losses[-1])
    with tape.no_grad():
        pred = forward(params, tape.input(X)).numpy()
    np.testing.assert_allclose(pred, Y, atol=0.1)


def test_first_adamw_step_matches_numpy(tape, rng):
    """One AdamW step against the formula (PyTorch's form)."""
    w0 = rng.standard_normal((3, 2))
    x = rng.standard_normal((5, 3))
    w = tape.parameter(w0)
    loss = tiga.sum(tiga.linear(tape.input(x), w))
    tape.backward(loss)
    g = np.broadcast_to(x.sum(0)[:, None], (3, 2))
    np.testing.assert_allclose(w.grad_numpy(), g)
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-8, 0.01
    tape.adamw_step(lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    m, v = (1 - b1) * g, (1 - b2) * g * g
    want = w0 * (1 - lr * wd) - lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_other_optimizers_reduce_the_loss(tape, rng, opt):
    X = rng.standard_normal((32, 2))
    Y = X @ np.array([[1.5], [-2.0]]) + 0.5
    params = make_mlp(tape, rng)
    first = None
    for step in range(60):
        tape.zero_grad()
        loss = tiga.mse(forward(params, tape.input(X)), Y)
        tape.backward(loss)
        norm = tape.clip_grad_norm(10.0)
        assert norm > 0
        if opt == "sgd":
            tape.sgd_step(lr=0.05, momentum=0.9)
        else:
            tape.adam_step(lr=0.02)
        first = first if first is not None else loss.item()
        last = loss.item()
        tape.reset()
    assert last < 0.3 * first, (first, last)


def test_gradcheck_from_python():
    rng = np.random.default_rng(0)

    def f(x, w):
        return tiga.sum(tiga.tanh(tiga.matmul(x, w)))

    res = tiga.gradcheck(f, [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))])
    assert res.passed and res.checked == 20

    def wrong(x):  # a callback error propagates as the Python exception
        raise KeyError("boom")

    with pytest.raises(KeyError):
        tiga.gradcheck(wrong, [np.ones(3)])

    def ids(table, idx):  # an integer index input is passed through, not differentiated
        return tiga.sum(tiga.embedding(table, idx))

    res = tiga.gradcheck(ids, [rng.standard_normal((4, 3)), np.array([1, 3], np.int32)], fast_mode=True)
    assert res.passed


def test_loss_scaler_state_round_trip(tape):
    """A scaler restored with set_state goes on as the original; a NaN step backs off both."""
    w = tape.parameter(np.array([1.0, 2.0, 3.0]), name="w")
    a, b = tiga.LossScaler(init_scale=1024, growth_interval=3), tiga.LossScaler(growth_interval=3)

    def step(sc, x):
        tape.zero_grad()
        loss = sc.scale(tape, tiga.sum(tiga.mul(tape.input(x), w)))
        tape.backward(loss)
        found = sc.unscale(tape)
        tape.reset()
        return found

    good, bad = np.array([0.5, -0.25, 2.0]), np.array([0.5, np.nan, 2.0])
    assert step(a, bad) and not step(a, good)
    assert a.state() == (512.0, 1)
    b.set_state(*a.state())
    for x in (good, good, bad, good):
        assert step(a, x) == step(b, x)
        assert a.state() == b.state()
    with pytest.raises(tiga.TigaError, match="growth_tracker"):
        b.set_state(1.0, 5000)
    with pytest.raises(tiga.TigaError, match="scale"):
        b.set_state(0.0, 0)

"""Checks the ctypes binding end to end: values, a linear layer's gradient against the closed
form, sticky errors surfacing as exceptions, stale ids after reset. Run: python3 test_tiga.py"""
import sys

import tiga


def close(a, b, tol=1e-12):
    return all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b)) and len(a) == len(b)


def main():
    failures = 0
    with tiga.Tape() as t:
        # y = sum(x W + b), x [2, 3], W [3, 2]: dW[i][j] = sum over rows of x[r][i]; db = rows
        x = t.input([2, 3], [1, 2, 3, 4, 5, 6])
        W = t.parameter([3, 2], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
        b = t.parameter([2], [1, -1])
        y = t.op("sum", t.op("linear", x, W, b))
        t.check()
        t.backward(y)
        want_y = (1 * 0.1 + 2 * 0.3 + 3 * 0.5 + 1) + (1 * 0.2 + 2 * 0.4 + 3 * 0.6 - 1) + \
            (4 * 0.1 + 5 * 0.3 + 6 * 0.5 + 1) + (4 * 0.2 + 5 * 0.4 + 6 * 0.6 - 1)
        checks = [
            ("forward", abs(t.scalar(y) - want_y) < 1e-12),
            ("dW", close(t.read(W, grad=True), [5, 5, 7, 7, 9, 9])),
            ("db", close(t.read(b, grad=True), [2, 2])),
            ("explain", "linear" in t.explain()),
        ]
        # a sticky error surfaces as an exception naming the op and argument
        bad = t.op("add", x, b)  # [2, 3] + [2] does not broadcast
        try:
            t.check()
            checks.append(("sticky error raised", False))
        except tiga.TigaError as e:
            checks.append(("sticky error raised", bad == tiga.NO_ID and "tg_add" in str(e) and "TG_ERR_SHAPE" in str(e)))
        tiga.lib().tg_tape_reset(t.t)
        try:
            t.read(x)
            checks.append(("stale id rejected", False))
        except tiga.TigaError as e:
            checks.append(("stale id rejected", "stale" in str(e)))
        checks.append(("parameter survives reset", close(t.read(W), [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])))
    for name, ok in checks:
        print(("PASS " if ok else "FAIL ") + name)
        failures += not ok
    print(f"{len(checks) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""tg_comm from Python: id files and the gradient-ready hook everywhere; a 1-rank comm on a GPU
build with NCCL (skipped otherwise)."""
import numpy as np
import pytest

import tiga


def test_comm_id_file_round_trip(tmp_path):
    ident = bytes(range(tiga.COMM_ID_BYTES))
    tiga.comm_id_write(ident, tmp_path / "id")
    assert tiga.comm_id_read(tmp_path / "id") == ident
    with pytest.raises(tiga.TigaError) as e:
        tiga.comm_id_read(tmp_path / "missing", timeout_s=0.01)
    assert e.value.status_name == "TG_ERR_IO"


def test_grad_ready_hook_once_per_parameter():
    tape = tiga.Tape()
    w = tape.parameter(np.ones((3, 2)))
    b = tape.parameter(np.zeros(2))
    seen = []
    tiga.set_grad_ready_hook(tape, seen.append)
    x = tape.input(np.random.rand(4, 3))
    tape.backward(tiga.sum(tiga.linear(x, w, b)))
    assert seen[0] is None and sorted(seen[1:]) == sorted([w.id, b.id])
    tiga.set_grad_ready_hook(tape, None)


def test_comm_one_rank_or_unsupported():
    try:
        ident = tiga.comm_id_create()
    except tiga.TigaError as e:
        assert e.status_name == "TG_ERR_UNSUPPORTED"
        pytest.skip(str(e))
    try:
        rt = tiga.Runtime(0)
    except tiga.TigaError as e:
        pytest.skip(str(e))
    tape = tiga.Tape(rt)
    w = tape.parameter(np.arange(6.0, dtype=np.float32).reshape(3, 2))
    comm = tiga.Comm(rt, 1, 0, ident, timeout_s=60)
    assert comm.rank() == (0, 1)
    comm.broadcast_parameters(tape)
    comm.attach(tape)
    x = tape.input(np.ones((4, 3), dtype=np.float32))
    tape.backward(tiga.sum(tiga.linear(x, w)))
    comm.finish_gradients(tape)
    np.testing.assert_array_equal(w.grad_numpy(), np.full((3, 2), 4.0, dtype=np.float32))
    comm.detach(tape)
    comm.close()

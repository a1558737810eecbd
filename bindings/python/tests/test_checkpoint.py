"""Checkpoints are safetensors files: written by tiga (Python or C) and read by the safetensors
package, PyTorch and plain NumPy; written by safetensors and read by tiga (Python and C);
train_charlm's too. Mismatches and corrupt files raise with the library's message."""
import json
import os
import struct
import subprocess

import ml_dtypes
import numpy as np
import pytest

import tiga

from conftest import REPO, c_compiler, have_torch


def model(tape, rng, zeros=False):
    shapes = {"enc.w": ((3, 4), np.float32), "enc.b": ((4,), np.float64), "emb": ((5, 2), np.float16),
              "head": ((2, 2), ml_dtypes.bfloat16)}
    ps = {}
    for name, (shape, dt) in shapes.items():
        data = np.zeros(shape, dt) if zeros else rng.standard_normal(shape).astype(dt)
        ps[name] = tape.parameter(data, name=name, no_weight_decay=name.endswith(".b"))
    return ps


def train_step(tape, ps):
    loss = tiga.add(tiga.sum(tiga.cast(ps["enc.w"], "f64")), tiga.sum(ps["enc.b"]))  # emb, head: no gradient
    tape.backward(loss)
    tape.adamw_step(lr=0.01)
    tape.reset()


def read_raw(path):
    """The file parsed by hand: (header dict, data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def test_written_by_tiga_read_by_others(tmp_path, rng):
    tape = tiga.Tape()
    ps = model(tape, rng)
    train_step(tape, ps)
    path = tmp_path / "m.safetensors"
    tape.save(path)
    header, data = read_raw(path)
    meta = header.pop("__metadata__")
    assert meta["tiga.format"] == "1" and meta["tiga.step"] == "1" and meta["enc.w.opt_step"] == "1"
    assert meta["enc.b.flags"] == "no_weight_decay" and meta["emb.opt_step"] == "0"
    assert set(header) == {"enc.w", "enc.w.opt_m", "enc.w.opt_v", "enc.b", "enc.b.opt_m", "enc.b.opt_v", "emb",
                           "head"}
    for name, p in ps.items():
        e = header[name]
        assert e["shape"] == list(p.shape)
        raw = np.frombuffer(data[e["data_offsets"][0]:e["data_offsets"][1]], p.numpy().dtype).reshape(p.shape)
        np.testing.assert_array_equal(raw, p.numpy())
    from safetensors.numpy import load_file

    loaded = load_file(str(path))
    for name, p in ps.items():
        np.testing.assert_array_equal(loaded[name], p.numpy())
    assert loaded["enc.w.opt_m"].shape == (3, 4)
    if have_torch():
        import torch
        from safetensors.torch import load_file as tload

        tl = tload(str(path))
        assert tl["head"].dtype == torch.bfloat16
        np.testing.assert_array_equal(tl["enc.b"].numpy(), ps["enc.b"].numpy())
        np.testing.assert_array_equal(tl["head"].float().numpy(), ps["head"].numpy().astype(np.float32))


def test_written_by_safetensors_read_by_tiga(tmp_path, rng):
    from safetensors.numpy import save_file

    src = {"enc.w": rng.standard_normal((3, 4)).astype(np.float32), "enc.b": rng.standard_normal(4),
           "emb": rng.standard_normal((5, 2)).astype(np.float16),
           "head": rng.standard_normal((2, 2)).astype(ml_dtypes.bfloat16),
           "enc.w.opt_m": np.full((3, 4), 0.5, np.float32)}
    path = tmp_path / "other.safetensors"
    save_file(src, str(path), metadata={"format": "pt", "enc.w.opt_step": "7"})
    tape = tiga.Tape()
    ps = model(tape, rng, zeros=True)
    tape.load(path)
    for name, p in ps.items():
        np.testing.assert_array_equal(p.numpy(), src[name])
    # the loaded state drives the next step: t = 8 for enc.w (bias correction 1 - 0.9^8)
    train_step(tape, ps)
    tape.save(tmp_path / "again.safetensors")
    assert read_raw(tmp_path / "again.safetensors")[0]["__metadata__"]["enc.w.opt_step"] == "8"
    if have_torch():
        import torch
        from safetensors.torch import save_file as tsave

        def to_torch(a):
            if a.dtype == ml_dtypes.bfloat16:
                return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
            return torch.from_numpy(a)

        tsave({k: to_torch(v) for k, v in src.items() if k != "enc.w.opt_m"}, str(tmp_path / "torch.safetensors"))
        tape.load(tmp_path / "torch.safetensors")
        for name, p in ps.items():
            np.testing.assert_array_equal(p.numpy(), src[name])


def test_mismatch_and_corruption_errors(tmp_path, rng):
    tape = tiga.Tape()
    ps = model(tape, rng)
    path = tmp_path / "m.safetensors"
    tape.save(path)
    other = tiga.Tape()
    other.parameter(np.zeros((3, 4), np.float32), name="enc.w")
    other.parameter(np.zeros(5), name="enc.b")
    with pytest.raises(tiga.TigaError, match=r"'enc.b' has shape \[4\] in the checkpoint and \[5\] on the tape") as e:
        other.load(path)
    assert e.value.status == tiga.Status.TG_ERR_SHAPE
    third = tiga.Tape()
    third.parameter(np.zeros((3, 4), np.float32), name="renamed")
    with pytest.raises(tiga.TigaError, match="parameter 'renamed' .* is not in the checkpoint"):
        third.load(path)
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0x10
    (tmp_path / "bad.safetensors").write_bytes(bytes(blob))
    before = ps["head"].numpy()
    with pytest.raises(tiga.TigaError, match="checksum mismatch") as e:
        tape.load(tmp_path / "bad.safetensors")
    assert e.value.status == tiga.Status.TG_ERR_IO
    np.testing.assert_array_equal(ps["head"].numpy(), before)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(tiga.TigaError, match="not a regular file"):
        tape.load(tmp_path / "fifo")


@pytest.fixture(scope="module")
def ckpt_tool(tmp_path_factory):
    cc = c_compiler()
    if not cc:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("ctool") / "ckpt_tool"
    libdir = os.path.dirname(tiga.library_path())
    src = os.path.join(os.path.dirname(__file__), "ckpt_tool.c")
    cmd = [cc, "-std=c11", "-Wall", "-Werror", "-I", tiga.get_include(), src, "-o", str(out), tiga.library_path(),
           f"-Wl,-rpath,{libdir}"]
    subprocess.run(cmd, check=True)
    return str(out)


def parse_tool(stdout):
    rows = dict(line.split(" ", 1) for line in stdout.strip().splitlines())
    return {k: np.array([float(x) for x in v.split()]) for k, v in rows.items()}


def test_python_writes_c_reads(tmp_path, ckpt_tool):
    tape = tiga.Tape()
    emb = tape.parameter(np.arange(6, dtype=np.float32).reshape(3, 2) / 4, name="emb")
    hb = tape.parameter(np.array([1.0, 2.0, 3.0, np.pi]), name="head.b", no_weight_decay=True)
    path = tmp_path / "py.safetensors"
    tape.save(path)
    r = subprocess.run([ckpt_tool, "read", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = parse_tool(r.stdout)
    np.testing.assert_array_equal(got["emb"], emb.numpy().ravel())
    np.testing.assert_array_equal(got["head.b"], hb.numpy())


def test_c_writes_python_reads(tmp_path, ckpt_tool):
    path = tmp_path / "c.safetensors"
    r = subprocess.run([ckpt_tool, "write", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = parse_tool(r.stdout)
    tape = tiga.Tape()
    hb = tape.parameter(np.zeros(4), name="head.b")
    emb = tape.parameter(np.zeros((3, 2), np.float32), name="emb")
    tape.load(path)
    np.testing.assert_array_equal(emb.numpy().ravel(), want["emb"].astype(np.float32))
    np.testing.assert_array_equal(hb.numpy(), want["head.b"])
    from safetensors.numpy import load_file

    assert set(load_file(str(path))) == {"emb", "emb.opt_m", "emb.opt_v", "head.b", "head.b.opt_m", "head.b.opt_v"}


def _train_charlm():
    for d in (os.environ.get("TIGA_BUILD_DIR"), os.path.join(REPO, "build")):
        if d and os.path.exists(os.path.join(d, "examples", "train_charlm")):
            return os.path.join(d, "examples", "train_charlm")
    return None


def test_train_charlm_checkpoint_is_safetensors(tmp_path):
    exe = _train_charlm()
    if not exe:
        pytest.skip("train_charlm not built (set TIGA_BUILD_DIR)")
    ck = tmp_path / "charlm.safetensors"
    args = [exe, "--device", "host", "--attention", "host", "--dtype", "f32", "--steps", "2", "--layers", "1",
            "--heads", "2", "--d-model", "16", "--context", "16", "--batch", "2", "--eval-interval", "1",
            "--eval-iters", "1", "--sample-chars", "0", "--out", str(tmp_path / "out"), "--save", str(ck)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    from safetensors.numpy import load_file

    t = load_file(str(ck))
    assert t["wte"].shape[1] == 16 and t["h.0.attn.wq"].shape == (16, 16) and "ln_f.w.opt_v" in t
    r = subprocess.run([exe, "--device", "host", "--attention", "host", "--dtype", "f32", "--sample", "--resume",
                        str(ck), "--prompt", "ROMEO:", "--sample-chars", "20", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ROMEO:" in r.stdout

"""Ops (tiga.h's op calls) on Values, relation constructors, and gradcheck. Every op raises
TigaError with the library's message when it fails. Python numbers and arrays given where a Value
is expected become inputs of the other operand's tape (in its dtype)."""
from __future__ import annotations

import ctypes as C
from typing import Any, Callable, List, Optional, Sequence, Union

import numpy as np

from ._core import (ABSENT, NO_ID, DType, Provider, Reduce, Relation, Runtime, Side, Tape, Value, _shape_arg,
                    as_array, to_dtype, DTypeLike)
from ._decls import CONSTANTS
from ._ffi import CALLBACK_TYPES, STATUS, STRUCT_TYPES, TigaError, lib, new_struct

Operand = Union[Value, float, int, np.ndarray]


def _tape_of(*xs: Any) -> Tape:
    for x in xs:
        if isinstance(x, Value):
            return x.tape
    raise TypeError("tiga: an op needs at least one tiga Value")


def _val(t: Tape, x: Operand, like: Optional[Value] = None) -> Value:
    if isinstance(x, Value):
        if x.tape is not t:
            raise ValueError("tiga: values of different tapes in one op")
        return x
    return t.input(x, dtype=like.dtype if like is not None else None)


def _opt(x: Optional[Value]) -> int:
    return ABSENT if x is None else x.id


def _binary(fn: Any, a: Operand, b: Operand) -> Value:
    t = _tape_of(a, b)
    like = a if isinstance(a, Value) else b
    va, vb = _val(t, a, like), _val(t, b, like)  # type: ignore[arg-type]
    return t._op(fn(t.handle, va.id, vb.id))


# ------------------------------------------------------------------ elementwise and linear algebra


def linear(x: Value, w: Value, b: Optional[Value] = None) -> Value:
    """y = x W + b; x [..., in], W [in, out], b [out] or None."""
    return x.tape._op(lib.tg_linear(x.tape.handle, x.id, w.id, _opt(b)))


def matmul(a: Value, b: Value) -> Value:
    return _binary(lib.tg_matmul, a, b)


def add(a: Operand, b: Operand) -> Value:
    """a + b with NumPy broadcasting."""
    return _binary(lib.tg_add, a, b)


def sub(a: Operand, b: Operand) -> Value:
    return _binary(lib.tg_sub, a, b)


def mul(a: Operand, b: Operand) -> Value:
    return _binary(lib.tg_mul, a, b)


def scale(x: Value, s: float) -> Value:
    return x.tape._op(lib.tg_scale(x.tape.handle, x.id, float(s)))


def relu(x: Value) -> Value:
    return x.tape._op(lib.tg_relu(x.tape.handle, x.id))


def leaky_relu(x: Value, slope: float = 0.01) -> Value:
    return x.tape._op(lib.tg_leaky_relu(x.tape.handle, x.id, float(slope)))


def elu(x: Value, alpha: float = 1.0) -> Value:
    return x.tape._op(lib.tg_elu(x.tape.handle, x.id, float(alpha)))


def gelu(x: Value) -> Value:
    """GPT-2's tanh form."""
    return x.tape._op(lib.tg_gelu(x.tape.handle, x.id))


def tanh(x: Value) -> Value:
    return x.tape._op(lib.tg_tanh(x.tape.handle, x.id))


def softmax(x: Value) -> Value:
    """Softmax over the last dim."""
    return x.tape._op(lib.tg_softmax(x.tape.handle, x.id))


def layernorm(x: Value, w: Value, b: Value, eps: float = 1e-5) -> Value:
    return x.tape._op(lib.tg_layernorm(x.tape.handle, x.id, w.id, b.id, float(eps)))


def embedding(table: Value, ids: Operand) -> Value:
    """Rows of table [V, D] picked by int32 ids (any shape)."""
    t = table.tape
    vid = ids if isinstance(ids, Value) else t.input(np.asarray(ids), dtype=DType.I32)
    return t._op(lib.tg_embedding(t.handle, table.id, vid.id))


def reshape(x: Value, *shape: Any) -> Value:
    """Same elements, new shape (one entry may be -1). No copy: of a parameter or an input it is a
    view, which raises once that leaf is rewritten (write, load, an optimizer step); reshape again."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    ndim, shp = _shape_arg(shape)
    return x.tape._op(lib.tg_reshape(x.tape.handle, x.id, ndim, shp))


def transpose(x: Value, d0: int = -2, d1: int = -1) -> Value:
    return x.tape._op(lib.tg_transpose(x.tape.handle, x.id, int(d0), int(d1)))


def concat(xs: Sequence[Value]) -> Value:
    """Concatenation along the last dim."""
    t = _tape_of(*xs)
    ids = (C.c_int64 * len(xs))(*[x.id for x in xs])
    return t._op(lib.tg_concat(t.handle, len(xs), ids))


def slice(x: Value, start: int, length: int) -> Value:  # noqa: A001 (tiga.h's name)
    """Columns [start, start + length) of the last dim."""
    return x.tape._op(lib.tg_slice(x.tape.handle, x.id, int(start), int(length)))


def split(x: Value, sizes: Sequence[int]) -> List[Value]:
    """Splits the last dim into pieces of the given sizes."""
    n = len(sizes)
    szs = (C.c_int64 * n)(*sizes)
    outs = (C.c_int64 * n)()
    x.tape._op(lib.tg_split(x.tape.handle, x.id, n, szs, outs))
    return [Value(x.tape, outs[i]) for i in range(n)]


def sum(x: Value) -> Value:  # noqa: A001
    return x.tape._op(lib.tg_sum(x.tape.handle, x.id))


def mean(x: Value) -> Value:
    return x.tape._op(lib.tg_mean(x.tape.handle, x.id))


def sum_last(x: Value) -> Value:
    return x.tape._op(lib.tg_sum_last(x.tape.handle, x.id))


def dot_last(a: Operand, b: Operand) -> Value:
    """sum_c a[..., c] * b[..., c]: equal last dims, the leading dims broadcast (NumPy's rule)."""
    return _binary(lib.tg_dot_last, a, b)


def cross_entropy(logits: Value, targets: Operand, ignore_index: Optional[int] = None) -> Value:
    """Mean cross-entropy of logits [..., C] against int32 targets [...]."""
    t = logits.tape
    tv = targets if isinstance(targets, Value) else t.input(np.asarray(targets), dtype=DType.I32)
    ign = CONSTANTS["TG_NO_IGNORE"] if ignore_index is None else int(ignore_index)
    return t._op(lib.tg_cross_entropy(t.handle, logits.id, tv.id, ign))


def mse(a: Operand, b: Operand) -> Value:
    return _binary(lib.tg_mse, a, b)


def dropout(x: Value, keep: float) -> Value:
    return x.tape._op(lib.tg_dropout(x.tape.handle, x.id, float(keep)))


def cast(x: Value, dtype: DTypeLike) -> Value:
    return x.tape._op(lib.tg_cast(x.tape.handle, x.id, int(to_dtype(dtype))))


# ------------------------------------------------------------------ relations


def _rel(rt: Runtime, fn: Callable[[C.c_void_p], int]) -> Relation:
    h = C.c_void_p()
    status = fn(h)
    if status != 0:
        raise TigaError(status, rt.error or lib.tg_last_error().decode())
    return Relation(rt, h.value)  # type: ignore[arg-type]


def relation_dense(rt: Runtime, nq: int, nk: int) -> Relation:
    return _rel(rt, lambda h: lib.tg_relation_dense(rt.handle, int(nq), int(nk), C.byref(h)))


def relation_causal(rt: Runtime, nq: int, nk: int) -> Relation:
    """Key j allowed for query i when j <= i + nk - nq."""
    return _rel(rt, lambda h: lib.tg_relation_causal(rt.handle, int(nq), int(nk), C.byref(h)))


def relation_mask(rt: Runtime, mask: Any) -> Relation:
    """A boolean mask [nq, nk] (shared by every batch entry) or [batch, nq, nk]."""
    m = np.ascontiguousarray(np.asarray(mask) != 0, dtype=np.uint8)
    if m.ndim == 2:
        batch, (nq, nk) = 0, m.shape
    elif m.ndim == 3:
        batch, nq, nk = m.shape
    else:
        raise ValueError("tiga: a mask is [nq, nk] or [batch, nq, nk]")
    return _rel(rt, lambda h: lib.tg_relation_mask(rt.handle, batch, nq, nk, m.ctypes.data, m.nbytes, C.byref(h)))


def relation_varlen(rt: Runtime, cu_seqlens_q: Any, cu_seqlens_k: Any = None, causal: bool = False) -> Relation:
    """Packed sequences; cu_seqlens as in FlashAttention (start 0, strictly increasing)."""
    q = np.ascontiguousarray(cu_seqlens_q, dtype=np.int32)
    k = None if cu_seqlens_k is None else np.ascontiguousarray(cu_seqlens_k, dtype=np.int32)
    return _rel(rt, lambda h: lib.tg_relation_varlen(rt.handle, len(q) - 1, q.ctypes.data, q.nbytes,
                                                     None if k is None else k.ctypes.data, 0 if k is None else k.nbytes,
                                                     int(causal), C.byref(h)))


def relation_csr(rt: Runtime, row_ptr: Any, col_idx: Any, nk: int) -> Relation:
    """General sparse relation: row_ptr [nq+1] int64, col_idx [nnz] int32 (sorted, unique per row)."""
    rp = np.ascontiguousarray(row_ptr, dtype=np.int64)
    ci = np.ascontiguousarray(col_idx, dtype=np.int32)
    return _rel(rt, lambda h: lib.tg_relation_csr(rt.handle, len(rp) - 1, int(nk), rp.ctypes.data, rp.nbytes,
                                                  ci.ctypes.data if ci.size else None, ci.nbytes, C.byref(h)))


def relation_concat(rt: Runtime, parts: Sequence[Relation]) -> Relation:
    """Block-diagonal concatenation (the parts are copied)."""
    arr = (C.c_void_p * len(parts))(*[p.handle for p in parts])
    return _rel(rt, lambda h: lib.tg_relation_concat(rt.handle, len(parts), arr, C.byref(h)))


def _radius_opts(max_neighbors: int, self_loops: bool, perm: Optional[np.ndarray]) -> Any:
    o = new_struct("tg_radius_options")
    o.max_neighbors = int(max_neighbors)
    o.flags = CONSTANTS["TG_RADIUS_SELF_LOOPS"] if self_loops else 0
    if perm is not None:
        o.perm_out = perm.ctypes.data
        o.perm_out_bytes = perm.nbytes
    return o


def relation_radius(rt: Runtime, pos_dst: Any, cutoff: float, pos_src: Any = None, max_neighbors: int = 0,
                    self_loops: bool = False, return_perm: bool = False) -> Any:
    """Radius graph of host positions [n, dim] (f32 / f64); with return_perm, (relation, perm)."""
    pd, dt = as_array(pos_dst)
    if pd.ndim != 2:
        raise ValueError("tiga: positions are [n, dim]")
    ps = None if pos_src is None else as_array(pos_src, dt)[0]
    perm = np.zeros(pd.shape[0], np.int64) if return_perm else None
    o = _radius_opts(max_neighbors, self_loops, perm)
    rel = _rel(rt, lambda h: lib.tg_relation_radius(
        rt.handle, pd.shape[1], int(dt), pd.shape[0], pd.ctypes.data, pd.nbytes, 0 if ps is None else ps.shape[0],
        None if ps is None else ps.ctypes.data, 0 if ps is None else ps.nbytes, float(cutoff), C.byref(o),
        C.byref(h)))
    return (rel, perm) if return_perm else rel


def relation_radius_value(pos_dst: Value, cutoff: float, pos_src: Optional[Value] = None, max_neighbors: int = 0,
                          self_loops: bool = False) -> Relation:
    """Radius graph of tape values (read where they live)."""
    t = pos_dst.tape
    o = _radius_opts(max_neighbors, self_loops, None)
    h = C.c_void_p()
    t._check(lib.tg_relation_radius_value(t.handle, pos_dst.id, _opt(pos_src), float(cutoff), C.byref(o),
                                          C.byref(h)))
    return Relation(t.runtime, h.value)  # type: ignore[arg-type]


# ------------------------------------------------------------------ attention and graph ops


def attention(q: Value, k: Value, v: Value, rel: Relation, scale: Optional[float] = None,
              block_prune_threshold: float = 0.0, dropout_keep: float = 1.0, return_lse: bool = False) -> Any:
    """softmax over the relation's allowed keys; q [B,Nq,Hq,D], k [B,Nk,Hkv,D], v [B,Nk,Hkv,Dv].
    With return_lse, (out, lse [B, Hq, Nq])."""
    t = q.tape
    o = new_struct("tg_attention_options")
    if scale is not None:
        o.scale = float(scale)
    o.block_prune_threshold = float(block_prune_threshold)
    o.dropout_keep = float(dropout_keep)
    lse = C.c_int64(NO_ID)
    if return_lse:
        o.lse_out = C.addressof(lse)
    out = t._op(lib.tg_attention(t.handle, q.id, k.id, v.id, rel.handle, C.byref(o)))
    return (out, Value(t, lse.value)) if return_lse else out


def mha(x: Value, wq: Value, wk: Value, wv: Value, wo: Value, heads_q: int, heads_kv: Optional[int] = None,
        causal: bool = False, rel: Optional[Relation] = None, attention_provider: Union[Provider, int] = 0,
        scale: Optional[float] = None, attention_dropout_keep: float = 1.0) -> Value:
    """Multi-head attention; x [B, n, dModel]."""
    t = x.tape
    o = new_struct("tg_mha_options")
    o.heads_q = int(heads_q)
    o.heads_kv = int(heads_kv if heads_kv is not None else heads_q)
    o.causal = int(causal)
    o.rel = rel.handle if rel is not None else None
    o.attention_provider = int(attention_provider)
    if scale is not None:
        o.scale = float(scale)
    o.attention_dropout_keep = float(attention_dropout_keep)
    return t._op(lib.tg_mha(t.handle, x.id, wq.id, wk.id, wv.id, wo.id, C.byref(o)))


def graph_gather(rel: Relation, x: Value, side: Union[Side, int] = Side.SOURCE) -> Value:
    """out[e] = x[j] (SOURCE) or x[i] (DEST) for the relation's edges e = (j -> i)."""
    return x.tape._op(lib.tg_graph_gather(x.tape.handle, rel.handle, x.id, int(side)))


def graph_reduce(rel: Relation, edge_values: Value, kind: Union[Reduce, int] = Reduce.SUM) -> Value:
    """[E, ...] -> [Nq, ...] by sum / mean / max over each destination's edges."""
    return edge_values.tape._op(lib.tg_graph_reduce(edge_values.tape.handle, rel.handle, edge_values.id, int(kind)))


def graph_softmax(rel: Relation, scores: Value) -> Value:
    """scores [E, H]: softmax over each destination's edges."""
    return scores.tape._op(lib.tg_graph_softmax(scores.tape.handle, rel.handle, scores.id))


def _graph_opts(negative_slope: float, dropout_keep: float, lse: Optional[C.c_int64]) -> Any:
    o = new_struct("tg_graph_attention_options")
    o.negative_slope = float(negative_slope)
    o.dropout_keep = float(dropout_keep)
    if lse is not None:
        o.lse_out = C.addressof(lse)
    return o


def graph_attend(rel: Relation, scores: Value, values: Value, dropout_keep: float = 1.0,
                 return_lse: bool = False) -> Any:
    """scores [E, H], values [Nk, H, F] -> [Nq, H, F]; with return_lse, (out, lse [H, Nq])."""
    t = scores.tape
    lse = C.c_int64(NO_ID)
    o = _graph_opts(0.2, dropout_keep, lse if return_lse else None)
    out = t._op(lib.tg_graph_attend(t.handle, rel.handle, scores.id, values.id, C.byref(o)))
    return (out, Value(t, lse.value)) if return_lse else out


def graph_displacement(rel: Relation, pos_src: Value, pos_dst: Value) -> Value:
    """out[e] = pos_src[j] - pos_dst[i]."""
    t = pos_src.tape
    return t._op(lib.tg_graph_displacement(t.handle, rel.handle, pos_src.id, pos_dst.id))


def gat_attention(rel: Relation, e_dst: Value, e_src: Value, values: Value, negative_slope: float = 0.2,
                  dropout_keep: float = 1.0, return_lse: bool = False) -> Any:
    """GAT: softmax_e LeakyReLU(e_dst[i] + e_src[j]) over each destination's edges, times values[j]."""
    t = values.tape
    lse = C.c_int64(NO_ID)
    o = _graph_opts(negative_slope, dropout_keep, lse if return_lse else None)
    out = t._op(lib.tg_gat_attention(t.handle, rel.handle, e_dst.id, e_src.id, values.id, C.byref(o)))
    return (out, Value(t, lse.value)) if return_lse else out


def edge_attention(rel: Relation, values: Value, w1: Value, w2: Value, pos_src: Optional[Value] = None,
                   pos_dst: Optional[Value] = None, x_src: Optional[Value] = None, x_dst: Optional[Value] = None,
                   edge_feat: Optional[Value] = None, b1: Optional[Value] = None, b2: Optional[Value] = None,
                   negative_slope: float = 0.2, dropout_keep: float = 1.0, return_lse: bool = False,
                   recompute_products: bool = False) -> Any:
    """Edge-MLP attention (tiga.h tg_edge_attention): the score of edge (j -> i) is
    LeakyReLU([pos_src[j] - pos_dst[i] | x_src[j] | x_dst[i] | edge_feat[e]] @ w1 + b1) @ w2 + b2, one
    softmax per destination and head, times values[j]. None = absent. recompute_products: CUDA_FUSED
    makes the per-node products again in the backward instead of keeping them (less memory)."""
    t = values.tape
    lse = C.c_int64(NO_ID)
    o = _graph_opts(negative_slope, dropout_keep, lse if return_lse else None)
    o.recompute_products = int(bool(recompute_products))
    out = t._op(lib.tg_edge_attention(t.handle, rel.handle, _opt(pos_src), _opt(pos_dst), _opt(x_src), _opt(x_dst),
                                      _opt(edge_feat), values.id, w1.id, _opt(b1), w2.id, _opt(b2), C.byref(o)))
    return (out, Value(t, lse.value)) if return_lse else out


# ------------------------------------------------------------------ gradcheck


class GradcheckResult:
    """tg_gradcheck_result as attributes (passed, worst_input, worst_index, analytic, numeric, ...)."""

    def __init__(self, s: Any):
        for name, _ in s._fields_:
            if name != "struct_size":
                setattr(self, name, getattr(s, name))
        self.passed = bool(self.passed)

    def __repr__(self) -> str:
        return (f"GradcheckResult(passed={self.passed}, worst_input={self.worst_input}, "
                f"worst_index={self.worst_index}, abs_err={self.abs_err:.3g})")


def gradcheck(fn: Callable[..., Value], inputs: Sequence[Any], runtime: Optional[Runtime] = None,
              differentiable: Optional[Sequence[bool]] = None, eps: Optional[float] = None,
              atol: Optional[float] = None, rtol: Optional[float] = None, fast_mode: bool = False,
              provider: Union[Provider, int] = 0, raise_on_failure: bool = True) -> GradcheckResult:
    """Compares fn's analytic gradients with central differences in float64. fn(*values) builds
    the function on a fresh tape and returns a one-element Value. Float inputs are f64 and
    differentiable unless differentiable[i] says otherwise; integer inputs are index inputs."""
    rt = runtime if runtime is not None else Runtime()
    arrays = []
    for i, x in enumerate(inputs):
        a = np.asarray(x)
        a = np.asarray(a, dtype=np.float64 if a.dtype.kind == "f" else np.int32, order="C")
        arrays.append(a)
    n = len(arrays)
    ins = (STRUCT_TYPES["tg_gradcheck_input"] * max(1, n))()
    for i, a in enumerate(arrays):
        lib.tg_gradcheck_input_init(C.byref(ins[i]))
        ins[i].dtype = int(to_dtype(a.dtype))
        ins[i].ndim = a.ndim
        for d, s in enumerate(a.shape):
            ins[i].shape[d] = s
        ins[i].data = a.ctypes.data
        ins[i].data_bytes = a.nbytes
        ins[i].differentiable = int(a.dtype == np.float64 and (differentiable is None or differentiable[i]))
    o = new_struct("tg_gradcheck_options")
    for k, v in (("eps", eps), ("atol", atol), ("rtol", rtol)):
        if v is not None:
            setattr(o, k, float(v))
    o.fast_mode = int(fast_mode)
    o.provider = int(provider)
    res = new_struct("tg_gradcheck_result")
    errors: List[BaseException] = []

    def callback(tape_h: int, ids: Any, user: Any) -> int:
        try:
            t = Tape._unowned(tape_h, rt)
            arr = (C.c_int64 * max(1, n)).from_address(ids)  # const tg_id * (a c_void_p here)
            out = fn(*[Value(t, arr[i]) for i in range(n)])
            return out.id
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors.append(e)
            return NO_ID

    cb = CALLBACK_TYPES["tg_gradcheck_fn"](callback)
    status = lib.tg_gradcheck(rt.handle, cb, None, n, ins, C.byref(o), C.byref(res))
    if errors:
        raise errors[0]
    result = GradcheckResult(res)
    if status != 0 and (raise_on_failure or status != STATUS["TG_ERR_GRADCHECK"]):
        raise TigaError(status, rt.error or lib.tg_last_error().decode())
    return result

/* Host reference attention (f32 and f64, math in double) over any relation representation.
 *
 *   s_ij  = scale <q[b,i,h,:], k[b,j,g(h),:]>      over the keys j the relation allows for i
 *   lse_i = log sum_j exp(s_ij)                      (-inf when no key is allowed)
 *   out_i = sum_j exp(s_ij - lse_i) v[b,j,g(h),:]    (0 when no key is allowed)
 * with g(h) = h / (Hq / Hkv). Layouts (row-major): q [B,Nq,Hq,D], k [B,Nk,Hkv,D],
 * v [B,Nk,Hkv,Dv], out / dout [B,Nq,Hq,Dv], lse [B,Hq,Nq].
 *
 * Backward recomputes p_ij = exp(s_ij - lse_i) from the saved lse:
 *   dp_ij = <dout_i, v_j>,  D_i = sum_j p_ij dp_ij,  ds_ij = p_ij (dp_ij - D_i)
 *   dq_i += scale sum_j ds_ij k_j,  dk_j += scale sum_i ds_ij q_i,  dv_j += sum_i p_ij dout_i
 * (dk, dv of a key/value head sum over the query heads of its group).
 *
 * Attention dropout (keep in (0, 1)): with w_ij = m_ij / keep (m the regenerated mask bit),
 *   out_i = sum_j p_ij w_ij v_j;  dp_ij = w_ij <dout_i, v_j>;  dv_j += sum_i p_ij w_ij dout_i;
 *   D_i = sum_j p_ij dp_ij (= <dout_i, out_i>) and ds as above. */
#ifndef TIGA_HOST_ATTENTION_H
#define TIGA_HOST_ATTENTION_H
#include "tiga.h"
#include "philox.h"
#include "relation.h"

typedef struct host_attn_shape {
  int64_t B, Nq, Nk, Hq, Hkv, D, Dv;
  double scale;
  double keep;         /* attention dropout: 1 (or 0) = none; else keep probability in (0, 1) */
  uint64_t seed, call; /* dropout stream: tape seed and RNG call counter (tiga.h) */
} host_attn_shape;

/* Dropout mask bit of (b, h, i, j) (tiga.h, host/philox.h): word tg_attn_drop_word(R, j) of the
 * Philox block tg_attn_drop_block(R, j, Nk) of stream call | 2^63, R = (b*Hq + h)*Nq + i. */
static inline int host_attn_kept(const host_attn_shape *sh, int64_t b, int64_t h, int64_t i, int64_t j) {
  uint32_t w[4];
  uint64_t R = (uint64_t)((b * sh->Hq + h) * sh->Nq + i);
  tg_philox4x32(sh->seed, tg_attn_drop_block(R, (uint64_t)j, (uint64_t)sh->Nk), sh->call | (1ull << 63), w);
  return w[tg_attn_drop_word(R, (uint64_t)j)] < tg_keep_threshold(sh->keep);
}

/* out (dt) and lse (double, [B,Hq,Nq]). TG_ERR_OUT_OF_MEMORY if scratch cannot be allocated. */
tg_status host_attention_forward(tg_dtype dt, const host_attn_shape *sh, const host_rel *rel, const void *q,
                                 const void *k, const void *v, void *out, double *lse);
/* Accumulates into dq, dk, dv (dt); any of them may be NULL (not wanted). */
tg_status host_attention_backward(tg_dtype dt, const host_attn_shape *sh, const host_rel *rel, const void *q,
                                  const void *k, const void *v, const void *dout, const double *lse, void *dq, void *dk,
                                  void *dv);
#endif

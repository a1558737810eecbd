// Placeholder until the fused kernels land: every entry point reports TG_ERR_UNSUPPORTED.
#include "attention_fused.h"
#include "common.cuh"

extern "C" tg_status cuda_attention_fused_supported(const tgc_attn_shape *sh) {
  (void)sh;
  tgc_set_error("the fused attention kernels are not built yet");
  return TG_ERR_UNSUPPORTED;
}
extern "C" size_t cuda_attention_fused_mask_bytes(int64_t b, int64_t nq, int64_t nk) {
  (void)b, (void)nq, (void)nk;
  return 0;
}
extern "C" tg_status cuda_attention_fused_mask_prepare(tgc_stream s, const uint8_t *m, int64_t b, int64_t nq,
                                                       int64_t nk, void *prep) {
  (void)s, (void)m, (void)b, (void)nq, (void)nk, (void)prep;
  return cuda_attention_fused_supported(nullptr);
}
extern "C" tg_status cuda_attention_fused_forward(tgc_stream s, const tgc_attn_shape *sh, const void *q, const void *k,
                                                  const void *v, void *out, float *lse, unsigned long long *c) {
  (void)s, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)c;
  return cuda_attention_fused_supported(sh);
}
extern "C" size_t cuda_attention_fused_backward_workspace(const tgc_attn_shape *sh) {
  (void)sh;
  return 0;
}
extern "C" tg_status cuda_attention_fused_backward(tgc_stream s, const tgc_attn_shape *sh, const void *q, const void *k,
                                                   const void *v, const void *o, const void *d, const float *l, void *dq,
                                                   void *dk, void *dv, void *w) {
  (void)s, (void)q, (void)k, (void)v, (void)o, (void)d, (void)l, (void)dq, (void)dk, (void)dv, (void)w;
  return cuda_attention_fused_supported(sh);
}

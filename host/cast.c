#include "cast.h"

#include <math.h>
#include <string.h>

float host_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t host_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1);                                           /* nearest even */
  return (uint16_t)(u >> 16);
}

float host_f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

uint16_t host_f32_to_f16(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f)) return 0x7e00;
  double v = fabs((double)f);
  if (v >= 65520.0) return sign | 0x7c00;                             /* rounds to infinity */
  if (v < 0x1.0p-14) return sign | (uint16_t)nearbyint(v * 0x1.0p24); /* subnormal grid 2^-24 */
  int e;
  double m = frexp(v, &e);          /* v = m 2^e, m in [0.5, 1) */
  double q = nearbyint(m * 2048.0); /* 11 significant bits, ties to even */
  if (q >= 2048.0) {
    q /= 2;
    e++;
  }
  return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((int)q - 1024);
}

static double load(tg_dtype dt, const void *x, int64_t i) {
  switch (dt) {
  case TG_F32: return ((const float *)x)[i];
  case TG_F64: return ((const double *)x)[i];
  case TG_F16: return host_f16_to_f32(((const uint16_t *)x)[i]);
  case TG_BF16: return host_bf16_to_f32(((const uint16_t *)x)[i]);
  default: return 0;
  }
}

static void store(tg_dtype dt, void *y, int64_t i, double v) {
  switch (dt) {
  case TG_F32: ((float *)y)[i] = (float)v; break;
  case TG_F64: ((double *)y)[i] = v; break;
  case TG_F16: ((uint16_t *)y)[i] = host_f32_to_f16((float)v); break;
  case TG_BF16: ((uint16_t *)y)[i] = host_f32_to_bf16((float)v); break;
  default: break;
  }
}

void host_cast(tg_dtype src, const void *x, tg_dtype dst, void *y, int64_t n, int add) {
  for (int64_t i = 0; i < n; i++)
    store(dst, y, i, (add ? load(dst, y, i) : 0.0) + load(src, x, i));
}

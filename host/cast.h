/* Host conversions between float dtypes (f32, f64, f16, bf16; round to nearest even). */
#ifndef TIGA_HOST_CAST_H
#define TIGA_HOST_CAST_H
#include "tiga.h"
#include <stdint.h>

float host_f16_to_f32(uint16_t h);
uint16_t host_f32_to_f16(float f);
float host_bf16_to_f32(uint16_t b);
uint16_t host_f32_to_bf16(float f);
/* y (dst dtype) = x (src dtype), n elements. add != 0: y += x instead (gradient accumulation). */
void host_cast(tg_dtype src, const void *x, tg_dtype dst, void *y, int64_t n, int add);
#endif

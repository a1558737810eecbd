/* Counter-based RNG (Philox4x32-10, Salmon et al. 2011): the value for counter c under key k
 * is a pure function of (k, c), so host and device produce identical streams. */
#ifndef TIGA_HOST_RANDOM_H
#define TIGA_HOST_RANDOM_H
#include <stdint.h>

void host_philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]);
/* Uniform in [0, 1) with 53 random bits, from words 0 and 1 of counter (i, stream). */
double host_uniform53(uint64_t key, uint64_t i, uint64_t stream);
/* Standard normal by Box-Muller on the four words of counter (i, stream). */
double host_normal(uint64_t key, uint64_t i, uint64_t stream);
#endif

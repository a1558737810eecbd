// Non-finite checks by exponent bits (NaN and +-inf have every exponent bit set), so the test does
// not depend on float compare semantics. One atomicMax per block (or thread) that saw one, none
// otherwise.
#include "common.cuh"
#include "finite.cuh"
#include "finite.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

template <typename U, U kExp>
__global__ void k_flag_nonfinite(const U *__restrict__ x, long long n, int tag, int *flag) {
  bool bad = false;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    bad |= (x[i] & kExp) == kExp;
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicMax(flag, tag);
}

template <typename U, U kExp> static tg_status flag(cudaStream_t s, const void *x, long long n, int tag, int *f) {
  if (n <= 0) return TG_OK;
  k_flag_nonfinite<U, kExp><<<tgc_blocks(n, 256, 1024), 256, 0, s>>>((const U *)x, n, tag, f);
  TGC_LAUNCHED("flag_nonfinite");
  return TG_OK;
}

extern "C" tg_status cuda_flag_nonfinite(tgc_stream s, tg_dtype dt, const void *x, int64_t n, int32_t tag, int32_t *f) {
  switch (dt) {
  case TG_F32: return flag<unsigned, 0x7f800000u>(s, x, n, tag, f);
  case TG_F64: return flag<unsigned long long, 0x7ff0000000000000ull>(s, x, n, tag, f);
  case TG_F16: return flag<unsigned short, (unsigned short)0x7c00u>(s, x, n, tag, f);
  case TG_BF16: return flag<unsigned short, (unsigned short)0x7f80u>(s, x, n, tag, f);
  default: tgc_set_error("flag_nonfinite: dtype %s is not a float dtype", tg_dtype_name(dt)); return TG_ERR_DTYPE;
  }
}

// ---------------------------------------------------------------- multi-tensor check
// Every block walks every entry of the launch; within an entry the grid's threads stride over it,
// 16-byte loads where the pointer is 16-byte aligned (the tail and unaligned tensors element by
// element). Each thread keeps the largest tag it saw per flag; only a thread that saw a non-finite
// element does an atomic, so the common (all finite) case writes nothing.
constexpr int kFiniteThreads = 256, kFiniteMaxBlocks = 1056; // ~8 resident blocks on each of 132 SMs

struct FiniteArgs {
  cuda_finite_entry e[CUDA_FINITE_LAUNCH_ENTRIES];
  int count;
};
static_assert(sizeof(FiniteArgs) <= 4096, "multi-tensor check arguments must stay within 4 KB of parameters");

template <typename U, U kExp> __device__ __forceinline__ bool vec_bad(uint4 v) {
  U w[16 / sizeof(U)];
  memcpy(w, &v, 16);
  bool bad = false;
#pragma unroll
  for (int k = 0; k < (int)(16 / sizeof(U)); k++)
    bad |= (w[k] & kExp) == kExp;
  return bad;
}

template <typename U, U kExp>
__device__ __forceinline__ bool entry_bad(const void *x, long long n, long long tid, long long stride) {
  constexpr long long kPer = 16 / sizeof(U); // elements per 16-byte load
  long long nvec = ((uintptr_t)x & 15) == 0 ? n / kPer : 0;
  const uint4 *v = (const uint4 *)x;
  bool bad = false;
  long long i = tid;
  for (; i + 3 * stride < nvec; i += 4 * stride) { // four loads in flight per thread
    uint4 a = __ldg(v + i), b = __ldg(v + i + stride), c = __ldg(v + i + 2 * stride), d = __ldg(v + i + 3 * stride);
    bad |= vec_bad<U, kExp>(a) | vec_bad<U, kExp>(b) | vec_bad<U, kExp>(c) | vec_bad<U, kExp>(d);
  }
  for (; i < nvec; i += stride)
    bad |= vec_bad<U, kExp>(__ldg(v + i));
  const U *p = (const U *)x;
  for (long long j = nvec * kPer + tid; j < n; j += stride)
    bad |= (p[j] & kExp) == kExp;
  return bad;
}

__global__ void __launch_bounds__(kFiniteThreads) k_flag_nonfinite_multi(FiniteArgs a, int *__restrict__ flags) {
  const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
  int best[CUDA_FINITE_FLAGS] = {0, 0, 0, 0};
  for (int k = 0; k < a.count; k++) {
    const cuda_finite_entry &e = a.e[k];
    if (tid >= e.n) continue; // this thread has no element of the entry (also n <= 0)
    bool bad = false;
    switch (e.dtype) {
    case TG_F32: bad = entry_bad<unsigned, 0x7f800000u>(e.x, e.n, tid, stride); break;
    case TG_F64: bad = entry_bad<unsigned long long, 0x7ff0000000000000ull>(e.x, e.n, tid, stride); break;
    case TG_F16: bad = entry_bad<unsigned short, (unsigned short)0x7c00u>(e.x, e.n, tid, stride); break;
    case TG_BF16: bad = entry_bad<unsigned short, (unsigned short)0x7f80u>(e.x, e.n, tid, stride); break;
    default: break; // refused on the host
    }
    if (bad && e.tag > best[e.flag]) best[e.flag] = e.tag;
  }
#pragma unroll
  for (int f = 0; f < CUDA_FINITE_FLAGS; f++)
    if (best[f] > 0) atomicMax(flags + f, best[f]);
}

// cuda_flag_nonfinite_multi with at most max_blocks blocks a launch.
static tg_status multi(cudaStream_t s, const cuda_finite_entry *e, int count, int32_t *flags, int max_blocks) {
  if (count < 0 || (count > 0 && (!e || !flags))) {
    tgc_set_error("flag_nonfinite_multi: %d entries at %p, flags %p", count, (const void *)e, (void *)flags);
    return TG_ERR_INVALID_ARGUMENT;
  }
  for (int k = 0; k < count; k++) {
    tg_dtype dt = (tg_dtype)e[k].dtype;
    if (dt != TG_F32 && dt != TG_F64 && dt != TG_F16 && dt != TG_BF16) {
      tgc_set_error("flag_nonfinite_multi: entry %d: dtype %s is not a float dtype", k, tg_dtype_name(dt));
      return TG_ERR_DTYPE;
    }
    if (e[k].flag < 0 || e[k].flag >= CUDA_FINITE_FLAGS || e[k].tag <= 0 || (e[k].n > 0 && !e[k].x)) {
      tgc_set_error("flag_nonfinite_multi: entry %d: flag %d, tag %d, %lld elements at %p", k, (int)e[k].flag,
                    (int)e[k].tag, (long long)e[k].n, e[k].x);
      return TG_ERR_INVALID_ARGUMENT;
    }
  }
  FiniteArgs a;
  memset(&a, 0, sizeof a);
  for (int k0 = 0; k0 < count; k0 += CUDA_FINITE_LAUNCH_ENTRIES) {
    a.count = count - k0 < CUDA_FINITE_LAUNCH_ENTRIES ? count - k0 : CUDA_FINITE_LAUNCH_ENTRIES;
    long long units = 0; // the largest entry in 16-byte loads: enough threads for it, at most a full GPU
    for (int k = 0; k < a.count; k++) {
      a.e[k] = e[k0 + k];
      long long esz = e[k0 + k].dtype == TG_F64 ? 8 : e[k0 + k].dtype == TG_F32 ? 4 : 2;
      long long u = e[k0 + k].n > 0 ? (e[k0 + k].n * esz + 15) / 16 : 0;
      if (u > units) units = u;
    }
    if (units == 0) continue;
    k_flag_nonfinite_multi<<<tgc_blocks(units, kFiniteThreads * 4, max_blocks), kFiniteThreads, 0, s>>>(a, flags);
    TGC_LAUNCHED("flag_nonfinite_multi");
  }
  return TG_OK;
}

extern "C" tg_status cuda_flag_nonfinite_multi(tgc_stream s, const cuda_finite_entry *e, int count, int32_t *flags) {
  return multi(s, e, count, flags, kFiniteMaxBlocks);
}

// ---------------------------------------------------------------- check stream
struct cuda_finite_side {
  cudaStream_t stream;
  cudaEvent_t ready; // recorded on main before each launch: the checked buffers are written
  cudaEvent_t done;  // recorded on the check stream after each launch
  int max_blocks;    // blocks a launch: few, so that the compute's blocks still find room beside them
};

extern "C" tg_status cuda_finite_side_create(cuda_finite_side **out) {
  *out = NULL;
  cuda_finite_side *s = (cuda_finite_side *)calloc(1, sizeof *s);
  if (!s) {
    tgc_set_error("check stream: out of host memory");
    return TG_ERR_OUT_OF_MEMORY;
  }
  int least = 0, greatest = 0; // the checks yield to the compute where the scheduler must choose
  cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, least);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
  // Two blocks of 256 threads per SM keep 64 KB of 16-byte loads in flight per SM (enough for the
  // device's bandwidth when the checks run alone) and leave most of each SM to the main stream.
  // TIGA_CHECK_FINITE_SIDE_BLOCKS (1 .. 4096) sets it for measurements.
  int dev = 0, sms = 0;
  if (e == cudaSuccess) e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  s->max_blocks = 2 * (sms > 0 ? sms : 66);
  const char *env = getenv("TIGA_CHECK_FINITE_SIDE_BLOCKS");
  if (env) {
    long v = strtol(env, NULL, 10);
    if (v >= 1 && v <= 4096) s->max_blocks = (int)v;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    tgc_set_error("check stream: %s", cudaGetErrorString(e));
    cuda_finite_side_destroy(s);
    return tgc_status_of(e);
  }
  *out = s;
  return TG_OK;
}

extern "C" void cuda_finite_side_destroy(cuda_finite_side *s) {
  if (!s) return;
  if (s->stream) cudaStreamSynchronize(s->stream);
  if (s->done) cudaEventDestroy(s->done);
  if (s->ready) cudaEventDestroy(s->ready);
  if (s->stream) cudaStreamDestroy(s->stream);
  free(s);
}

extern "C" tg_status cuda_finite_side_launch(cuda_finite_side *s, tgc_stream main, const cuda_finite_entry *e,
                                             int count, int32_t *flags) {
  if (!s || count <= 0) return s ? TG_OK : cuda_flag_nonfinite_multi(main, e, count, flags);
  TGC_CUDA(cudaEventRecord(s->ready, main));
  TGC_CUDA(cudaStreamWaitEvent(s->stream, s->ready, 0));
  tg_status st = multi(s->stream, e, count, flags, s->max_blocks);
  if (st) return st;
  TGC_CUDA(cudaEventRecord(s->done, s->stream));
  return TG_OK;
}

extern "C" tg_status cuda_finite_side_join(cuda_finite_side *s, tgc_stream main) {
  if (!s) return TG_OK;
  TGC_CUDA(cudaStreamWaitEvent(main, s->done, 0));
  return TG_OK;
}

// ---------------------------------------------------------------- in-kernel checks (finite.cuh)
// Per host thread: the armed flag, its stream and tag, and the buffers checked under it. A node
// writes few buffers; past kCover the rest are simply checked again by the tape.
namespace {
constexpr int kCover = 8;
struct NfArm {
  int *flag;
  int tag;
  cudaStream_t s;
  int n;
  const void *p[kCover];
  long long len[kCover];
  int tags[kCover];
};
thread_local NfArm g_nf;
} // namespace

extern "C" void cuda_nf_arm(tgc_stream s, int32_t *flag, int32_t tag) {
  g_nf.flag = flag;
  g_nf.tag = tag;
  g_nf.s = (cudaStream_t)s;
  g_nf.n = 0;
}

extern "C" void cuda_nf_disarm(void) {
  g_nf.flag = nullptr;
  g_nf.n = 0;
}

extern "C" int cuda_nf_covered(const void *p, int64_t n, int32_t tag) {
  for (int k = 0; k < g_nf.n; k++)
    if (g_nf.p[k] == p && g_nf.len[k] == n && g_nf.tags[k] == tag) return 1;
  return 0;
}

tgc_nf tgc_nf_take(cudaStream_t s) {
  if (!g_nf.flag || g_nf.s != s) return tgc_nf{nullptr, 0};
  return tgc_nf{g_nf.flag, g_nf.tag};
}

void tgc_nf_cover(const tgc_nf &nf, const void *p, long long n) {
  if (!nf.flag || nf.flag != g_nf.flag || nf.tag != g_nf.tag || g_nf.n == kCover || n <= 0) return;
  g_nf.p[g_nf.n] = p;
  g_nf.len[g_nf.n] = n;
  g_nf.tags[g_nf.n++] = g_nf.tag;
}

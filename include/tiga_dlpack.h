/*
 * tiga_dlpack.h — the DLPack structs that tg_tape_export_dlpack hands out, for programs that do
 * not have dlpack.h. C11, also valid C++; includes no CUDA header.
 *
 * The layout is the DLPack ABI (v0.8, unchanged in 1.0 for DLManagedTensor): DLDevice,
 * DLDataType, DLTensor and DLManagedTensor, with the same names and field order, so a
 * DLManagedTensor * from tiga can be handed to any DLPack consumer (torch.utils.dlpack,
 * cupy.from_dlpack, numpy.from_dlpack, jax.dlpack) as the "dltensor" capsule.
 *
 * This header and dlpack.h exclude each other through dlpack.h's include guard
 * (DLPACK_DLPACK_H_): include either one, or both in any order, and the first one wins. Include
 * dlpack.h first when you need what this subset leaves out (DLManagedTensorVersioned, more
 * device kinds).
 */
#ifndef TIGA_DLPACK_H
#define TIGA_DLPACK_H

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLPACK_MAJOR_VERSION 0
#define DLPACK_MINOR_VERSION 8
#define DLPACK_VERSION 80

/* Device kinds tiga produces (the DLPack values). */
enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
/* Type codes tiga produces. */
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

typedef struct {
  int32_t device_type; /* kDLCPU or kDLCUDA (an enum of 4 bytes in dlpack.h) */
  int32_t device_id;   /* 0 on the host; the CUDA ordinal */
} DLDevice;

typedef struct {
  uint8_t code;   /* kDLInt, kDLUInt, kDLFloat, kDLBfloat */
  uint8_t bits;   /* 8, 16, 32, 64 */
  uint16_t lanes; /* 1 */
} DLDataType;

typedef struct {
  void *data; /* the first element is at (char *)data + byte_offset */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;   /* ndim sizes */
  int64_t *strides; /* ndim strides in elements (row-major from tiga), or NULL: row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;                             /* the producer's */
  void (*deleter)(struct DLManagedTensor *self); /* call once when done; may be NULL */
} DLManagedTensor;

#ifdef __cplusplus
}
#endif

#endif /* DLPACK_DLPACK_H_ */
#endif /* TIGA_DLPACK_H */

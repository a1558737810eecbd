/*
 * tiga.h — the one public header of tiga, a reverse-mode autodiff tape runtime for CUDA.
 *
 * C11, also valid C++; includes no CUDA header.
 *
 * Model in one paragraph. A runtime (tg_runtime) owns a device context (or none, host-only).
 * A tape (tg_tape) records values and the nodes that produced them. Values are named by
 * integer ids (tg_id), easy to pass through any FFI. Ops run eagerly when called and record
 * a node with its local VJP; tg_tape_backward runs the reverse sweep. Parameters persist
 * across tg_tape_reset; every other value ("step value") is dropped by it and its memory is
 * reused by the next step.
 *
 * Errors. Two kinds of calls:
 *   - calls that create, read, write or run (tg_*_create, tg_tape_input, tg_tape_read,
 *     tg_tape_backward, optimizer steps, ...) return a tg_status; the message of the last
 *     failure is tg_tape_error(tape) or tg_runtime_error(rt), or tg_last_error() when no
 *     handle could be named (e.g. a NULL handle).
 *   - op calls (tg_linear, tg_add, ...) return the id of the new value. On failure they
 *     return TG_NO_ID and the error becomes *sticky* on the tape: every later op call on the
 *     tape does nothing and returns TG_NO_ID, and tg_tape_status / tg_tape_error report the
 *     first failure (which op, which argument, expected vs got). Functions that run (backward,
 *     optimizer steps) refuse to run on a tape with a sticky error. tg_tape_reset clears it.
 *   So a training loop reads like the math and checks once; an FFI host can still check
 *   every op call (TG_NO_ID) or call tg_tape_status after each.
 *
 * Ownership. Pointers passed in are borrowed for the duration of the call only: the library
 * copies what it keeps (host buffers, shapes). The one exception says so in its name:
 * tg_tape_input_borrowed keeps the caller's buffer (zero-copy) until tg_tape_reset. Handles
 * returned through out-parameters are owned by the caller and released with their destroy
 * function. Strings returned by the library are owned by the library and valid until the next
 * call on the same handle. Strings passed in (paths, names) are NUL-terminated.
 *
 * Lifetimes (safe for a garbage-collected host that finalizes in any order). Handles are
 * reference counted: a tape holds a reference to its runtime; a relation holds one to its
 * runtime; every recorded node that uses a relation holds one to the relation until the node
 * is dropped (tg_tape_reset / tg_tape_destroy); every DLPack tensor exported from a tape holds
 * one to the tape until its deleter runs. tg_runtime_destroy, tg_relation_destroy and
 * tg_tape_destroy drop the CALLER's reference: the object lives on until its last user is
 * gone, so destroying a relation before backward, a runtime before its tapes, or a tape before
 * the DLPack tensors exported from it, is allowed and safe. After its destroy call the caller
 * must not pass that handle again (other holders keep it alive, not the caller's pointer).
 * Destroying the same handle twice is a caller error.
 *
 * API rules (every function follows them; bindings can rely on them):
 *   - every pointer to caller data comes with its size in bytes (…_bytes), checked against
 *     what the call needs: a mismatch is TG_ERR_INVALID_ARGUMENT, never a short read;
 *   - options structs start with `size_t struct_size` and are initialised by their
 *     tg_<name>_init function, which writes struct_size and every default. A field holds its
 *     value: zero is never a stand-in for "default" (defaults come only from the init
 *     function; a call-dependent default has a named constant, e.g. TG_SCALE_AUTO). A struct
 *     whose struct_size is 0 (not initialised) or larger than the library knows (built against
 *     a newer header) is refused with a message; a size the library published earlier is
 *     accepted, the fields it lacks taking their init defaults;
 *   - no struct is passed or returned by value;
 *   - an optional value argument takes TG_ABSENT for "none". TG_NO_ID (what a failed op
 *     returns) is never read as "none": passing it is an error, so a failed creation cannot
 *     silently turn into a missing bias.
 *
 * Versions and ABI. TIGA_API_VERSION (header) and tg_api_version() (library) are
 * MAJOR*10000 + MINOR*100 + PATCH; a binding checks them at load. While MAJOR is 0, every MINOR
 * release may change the ABI: the shared library's SONAME is libtiga.so.0.MINOR and the CMake
 * package accepts only the same MAJOR.MINOR (SameMinorVersion); PATCH releases keep the ABI.
 * From 1.0 on, the SONAME is libtiga.so.MAJOR and compatibility is SameMajorVersion.
 *
 * Threads. A runtime and every tape and relation created from it must be used by one thread
 * at a time (the caller serialises); different runtimes are independent. Reference counts are
 * atomic, so a finalizer may drop a handle from another thread while no call is using it.
 * tg_last_error() is thread-local. Debug builds of the library (NDEBUG not defined, e.g. CMake's
 * Debug, or TIGA_DEBUG defined) detect two threads inside calls on one runtime at once: a tape call
 * or op call that starts while another thread is inside one on the same runtime (or its tapes)
 * does nothing and fails (TG_ERR_STATE, or TG_NO_ID for an op call, without touching the tape's
 * sticky status), with the message in tg_last_error() and on stderr. Release builds do not check.
 *
 * Non-finite values. Nothing checks for NaN / inf unless asked: tg_tape_set_check_finite (anomaly
 * mode), the optimizers (a step whose gradients are not all finite is skipped and reported),
 * tg_clip_grad_norm_with's error_if_nonfinite and the loss scaler. Each reports TG_ERR_NONFINITE.
 */
#ifndef TIGA_H
#define TIGA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TG_API
#elif defined(__GNUC__)
#define TG_API __attribute__((visibility("default")))
#else
#define TG_API
#endif

/* ---------------------------------------------------------------- version */

#define TIGA_VERSION_MAJOR 0
#define TIGA_VERSION_MINOR 2
#define TIGA_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH of the header; compare with tg_api_version() at run time. */
#define TIGA_API_VERSION (TIGA_VERSION_MAJOR * 10000 + TIGA_VERSION_MINOR * 100 + TIGA_VERSION_PATCH)

/* The TIGA_API_VERSION the library was built with. */
TG_API int tg_api_version(void);
/* "MAJOR.MINOR.PATCH" plus build flavour (e.g. "0.2.0 (cuda)"); static storage. */
TG_API const char *tg_version_string(void);

/* ---------------------------------------------------------------- status */

typedef enum tg_status {
  TG_OK = 0,
  TG_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, value out of range, bad flag */
  TG_ERR_SHAPE = 2,            /* shapes that do not fit the op */
  TG_ERR_DTYPE = 3,            /* a dtype the op or provider does not take */
  TG_ERR_INVALID_ID = 4,       /* unknown id, or a step value dropped by tg_tape_reset */
  TG_ERR_UNSUPPORTED = 5,      /* a provider / feature combination that is not implemented */
  TG_ERR_NO_DEVICE = 6,        /* a CUDA provider asked for on a host-only runtime */
  TG_ERR_OUT_OF_MEMORY = 7,    /* host or device allocation failed */
  TG_ERR_DEVICE = 8,           /* a CUDA / cuBLAS / cuRAND call failed */
  TG_ERR_STATE = 9,            /* call not valid now (backward of a non-scalar, sticky error, ...) */
  TG_ERR_IO = 10,              /* file could not be read or written */
  TG_ERR_GRADCHECK = 11,       /* tg_gradcheck found a mismatch */
  TG_ERR_INTERNAL = 12,        /* a bug in tiga; please report the message */
  TG_ERR_NONFINITE = 13        /* a NaN or inf where finite values were required (see "Non-finite
                                  values" at the top) */
} tg_status;

/* Static English name of a status, e.g. "TG_ERR_SHAPE". Unknown values give "TG_ERR_UNKNOWN". */
TG_API const char *tg_status_string(tg_status s);

/* Message of the last failure on this thread that could not be attached to a handle
 * (NULL handle passed, create failed). Thread-local storage; never NULL. */
TG_API const char *tg_last_error(void);

/* ---------------------------------------------------------------- dtypes */

typedef enum tg_dtype {
  TG_F32 = 0,
  TG_F64 = 1,
  TG_F16 = 2,  /* storage type for CUDA work (IEEE binary16) */
  TG_BF16 = 3, /* storage type for CUDA work (bfloat16) */
  TG_I32 = 4,
  TG_I64 = 5,
  TG_U8 = 6, /* also used for booleans: 0 false, anything else true */
  TG_DTYPE_COUNT = 7
} tg_dtype;

/* Bytes per element (0 for an invalid dtype) and static name ("f32", ...). */
TG_API size_t tg_dtype_size(tg_dtype dt);
TG_API const char *tg_dtype_name(tg_dtype dt);

/* ---------------------------------------------------------------- providers */

/* Who computes a node. AUTO = CUDA when the runtime has a device, else HOST.
 * For ops without a composed/fused distinction, CUDA_FUSED and CUDA_COMPOSED both mean
 * "the op's CUDA kernel" (TG_PROVIDER_CUDA). A provider that an op does not implement is an
 * error (TG_ERR_UNSUPPORTED, or TG_ERR_NO_DEVICE on a host-only runtime): never a silent
 * substitution. */
typedef enum tg_provider {
  TG_PROVIDER_AUTO = 0,
  TG_PROVIDER_HOST = 1,
  TG_PROVIDER_CUDA_FUSED = 2,
  TG_PROVIDER_CUDA_COMPOSED = 3
} tg_provider;
#define TG_PROVIDER_CUDA TG_PROVIDER_CUDA_FUSED

TG_API const char *tg_provider_name(tg_provider p);

/* ---------------------------------------------------------------- runtime */

typedef struct tg_runtime tg_runtime;

/* A runtime without a device. *out is set to NULL on failure. */
TG_API tg_status tg_runtime_create_host(tg_runtime **out);
/* A runtime on CUDA device `device` (0-based). TG_ERR_NO_DEVICE when the build has no CUDA,
 * no driver is present or the index is out of range. */
TG_API tg_status tg_runtime_create_cuda(int device, tg_runtime **out);
/* Drops the caller's reference. NULL is a no-op. The runtime (its device context and memory)
 * is freed when its last tape and relation are destroyed too; until then they keep working. */
TG_API void tg_runtime_destroy(tg_runtime *rt);
/* Message of the last failure reported on this runtime ("" if none). Owned by the runtime. */
TG_API const char *tg_runtime_error(const tg_runtime *rt);
/* 1 if the runtime has a CUDA device, else 0 (also for NULL). */
TG_API int tg_runtime_has_device(const tg_runtime *rt);
/* Bytes of device memory the runtime holds now (values, step memory, relations' device forms)
 * and at its peak since creation or the last tg_runtime_reset_peak (0 and 0 on a host-only
 * runtime). Either pointer may be NULL. */
TG_API tg_status tg_runtime_memory(const tg_runtime *rt, size_t *current, size_t *peak);
TG_API tg_status tg_runtime_reset_peak(tg_runtime *rt);

/* Testing hook: the device allocation (device memory, and pinned host memory of the runtime's step
 * arena) after the next `after` successful ones fails as if the device were out of memory (once).
 * after < 0 disables. TG_ERR_NO_DEVICE on host runtimes. */
TG_API tg_status tg_runtime_inject_alloc_failure(tg_runtime *rt, int64_t after);
/* The countdown armed by tg_runtime_inject_alloc_failure now: -1 once it fired (or when disarmed),
 * so a test walking every allocation of an operation knows when it has seen them all. */
TG_API tg_status tg_runtime_alloc_failure_pending(const tg_runtime *rt, int64_t *pending);
/* Testing hook, the host twin (SQLite-style fault injection): on the calling thread, the library's
 * host allocation (every malloc / calloc / realloc / aligned_alloc of tiga's tape, ops, optimizers
 * and host kernels) after the next `after` successful ones fails as if the system were out of
 * memory (once); after < 0 disarms. *pending (may be NULL) receives the countdown armed before this
 * call: -1 when it fired (or none was armed). Walk: arm k, run the operation, disarm; the walk is
 * complete once the disarm reports pending >= 0 (the operation made fewer than k + 1 allocations).
 * Thread-local, so other threads are not affected. */
TG_API tg_status tg_inject_host_alloc_failure(int64_t after, int64_t *pending);
/* Waits for the runtime's device work to finish (TG_OK at once on host runtimes). */
TG_API tg_status tg_runtime_sync(tg_runtime *rt);
/* The CUDA stream (a cudaStream_t, as void *) on which the runtime runs all its device work;
 * NULL on a host-only runtime. For ordering work of other libraries with tiga's: e.g. a
 * DLPack producer asked to make a tensor ready for this stream (__dlpack__(stream=...)) before
 * tg_tape_input_borrowed. The stream belongs to the runtime; do not destroy it. */
TG_API tg_status tg_runtime_cuda_stream(tg_runtime *rt, void **stream);

/* ---------------------------------------------------------------- tape */

typedef struct tg_tape tg_tape;
/* A value's id: an int64 >= 0 that names the value within its tape; negative ids are reserved
 * (TG_NO_ID, TG_ABSENT). An id also tells its tape apart from every other live tape and its value
 * apart from earlier values of the same slot, so an id of another tape or of a value dropped by
 * tg_tape_reset is always refused (TG_ERR_INVALID_ID), never read as another value: no two live
 * tapes share an id space, and a slot whose generations run out is retired, not reused. A tape
 * holds at most 2^26 - 1 values at once; at most 2^19 - 1 tapes are alive at once. */
typedef int64_t tg_id;
/* What an op returns on failure (and what tg_tape_input & co. write on failure). Never a valid
 * argument: an op given TG_NO_ID fails with TG_ERR_INVALID_ID. */
#define TG_NO_ID ((tg_id)-1)
/* "No value" for an optional argument (e.g. tg_linear's bias). Only where documented. */
#define TG_ABSENT ((tg_id)-2)
#define TG_MAX_DIMS 8

/* Flags for tg_tape_input / tg_tape_parameter. */
#define TG_REQUIRES_GRAD 0x1u   /* input: gradients are computed for it (leaf gradient) */
#define TG_NO_WEIGHT_DECAY 0x2u /* parameter: AdamW/SGD skip weight decay (biases, norms) */

/* A tape of runtime rt; the tape holds a reference to rt (tiga.h top: lifetimes). */
TG_API tg_status tg_tape_create(tg_runtime *rt, tg_tape **out);
/* Drops the caller's reference. NULL is a no-op. When no DLPack tensor exported from the tape
 * is alive, frees the tape, its values, parameters and optimizer state at once, and drops its
 * references to the runtime and to the relations its nodes use; otherwise that happens when
 * the last exported tensor's deleter runs (tiga.h top: lifetimes). */
TG_API void tg_tape_destroy(tg_tape *tape);

/* The runtime a tape was created from (NULL for NULL), e.g. to build relations for it. The
 * pointer is valid while the tape lives (the tape holds a reference); it adds no reference. */
TG_API tg_runtime *tg_tape_runtime(const tg_tape *tape);

/* Sticky status of op calls: TG_OK, or the first failure since create / the last reset. */
TG_API tg_status tg_tape_status(const tg_tape *tape);
/* Message of the sticky failure if any, else of the most recent failed call on this tape,
 * else "". Owned by the tape. */
TG_API const char *tg_tape_error(const tg_tape *tape);

/* Ends a step: drops every step value (inputs, constants, op results) and every node,
 * keeps parameters with their values, gradients and optimizer state, clears the sticky
 * error, and keeps the step memory to reuse. Ids of dropped values become stale
 * (TG_ERR_INVALID_ID on use); parameter ids stay valid. */
TG_API tg_status tg_tape_reset(tg_tape *tape);

/* Grad mode. When disabled (inference), ops record no node and save nothing; their results
 * cannot be differentiated. Default: enabled. Returns the status; *previous (may be NULL)
 * receives the old mode. */
TG_API tg_status tg_tape_set_grad_enabled(tg_tape *tape, int enabled, int *previous);

/* Provider used by the ops recorded next (default TG_PROVIDER_AUTO). Set it around a single
 * op call to choose that node's provider. *previous (may be NULL) receives the old one. */
TG_API tg_status tg_tape_set_provider(tg_tape *tape, tg_provider provider, tg_provider *previous);

/* Seed of the tape's RNG stream used by tg_dropout (initializers take their own seed). */
TG_API tg_status tg_tape_set_seed(tg_tape *tape, uint64_t seed);

/* Anomaly mode (PyTorch's detect_anomaly, for NaN / inf). When on, every node recorded after this
 * call has its outputs checked for NaN / inf, and in tg_tape_backward every gradient a node computes
 * for its inputs is checked; each check runs on the side that computed the value (a scan on the
 * host; on CUDA a device flag, raised by the kernel that stores the value where it can (cast,
 * unary, binary, dropout, layer norm) and by a check kernel that reads the value otherwise (cuBLAS
 * outputs, the rest)), and device flags are read once per sweep: no per-node synchronisation. The
 * first non-finite value becomes a sticky TG_ERR_NONFINITE whose message names the node (#index),
 * its op, provider and explain line: for host nodes at once; for CUDA nodes at the next status
 * check after the forward (tg_tape_status, tg_tape_error, tg_tape_explain, optimizer steps), or at
 * the end of tg_tape_backward, which reads the forward's flag with the sweep's (a forward finding
 * comes first; backward does not wait for the device before it starts). The sticky error stops
 * later op calls and refuses backward and optimizer steps until tg_tape_reset. Nodes are only
 * recorded in grad mode, so no-grad forwards are not checked. Default off. *previous (may be NULL)
 * receives the old mode. */
TG_API tg_status tg_tape_set_check_finite(tg_tape *tape, int on, int *previous);

/* ---- creating values. `shape` has `ndim` entries (0 <= ndim <= TG_MAX_DIMS, each > 0);
 * ndim 0 is a scalar. `data` holds data_bytes = numel * tg_dtype_size(dtype) bytes, row-major
 * (any other data_bytes is TG_ERR_INVALID_ARGUMENT); it is copied. *out is TG_NO_ID on failure. */

/* A step value. flags: 0 or TG_REQUIRES_GRAD (float dtypes only). */
TG_API tg_status tg_tape_input(tg_tape *tape, tg_dtype dtype, int ndim, const int64_t *shape, const void *data,
                               size_t data_bytes, unsigned flags, tg_id *out);
/* A trainable parameter: persists across tg_tape_reset, requires grad, is updated by the
 * optimizer steps. data NULL with data_bytes 0: zeros. flags: 0 or TG_NO_WEIGHT_DECAY. Float
 * dtypes. */
TG_API tg_status tg_tape_parameter(tg_tape *tape, tg_dtype dtype, int ndim, const int64_t *shape, const void *data,
                                   size_t data_bytes, unsigned flags, tg_id *out);

/* Where a buffer lives, for zero-copy inputs and exports. */
typedef enum tg_memory {
  TG_MEMORY_HOST = 0, /* host memory (pageable or pinned); device index 0 */
  TG_MEMORY_CUDA = 1  /* device memory of a CUDA device; device index = the device's ordinal */
} tg_memory;

/* A step value over the caller's buffer, without a copy (zero-copy): e.g. a PyTorch, CuPy or
 * NumPy batch handed over as it is. Arguments as tg_tape_input, plus where `data` lives:
 * memory TG_MEMORY_HOST with device 0, or TG_MEMORY_CUDA with device = the runtime's CUDA
 * device (TG_ERR_NO_DEVICE on a host-only runtime; another device: TG_ERR_INVALID_ARGUMENT).
 * data holds data_bytes = numel * dtype size bytes, dense row-major, aligned to the dtype size
 * (else TG_ERR_INVALID_ARGUMENT); a CUDA build checks that a TG_MEMORY_CUDA pointer is device
 * memory of that device.
 * Lifetime rule: the caller keeps the buffer alive and unchanged until the value is dropped,
 * i.e. until tg_tape_reset or tg_tape_destroy returns. The library reads it whenever a node
 * needs it (ops, backward) and never writes it: tg_tape_write on the value is TG_ERR_STATE.
 * Device data must be ready when passed: the work that wrote it has finished, or is ordered
 * before the runtime's stream (tg_runtime_cuda_stream). flags: 0 or TG_REQUIRES_GRAD (the
 * gradient gets its own memory). *out is TG_NO_ID on failure. */
TG_API tg_status tg_tape_input_borrowed(tg_tape *tape, tg_dtype dtype, int ndim, const int64_t *shape, const void *data,
                                        size_t data_bytes, tg_memory memory, int device, unsigned flags, tg_id *out);

/* Initializers. Values are a pure function of (kind, a, b, gain, seed, shape, dtype): the i-th
 * element (row-major) is drawn from Philox4x32-10 with key = seed and counter = i (two 32-bit
 * words give one uniform in [0,1) with 53 bits for f64 / 24 for f32; normals by Box-Muller
 * on two uniforms of the same counter) -- cuRAND's Philox stream at subsequence 0. Drawn on the
 * host and uploaded once, so the values are identical on every provider.
 *   NORMAL          mean a, std b
 *   UNIFORM         in [a, b)
 *   XAVIER_UNIFORM  U(-g*sqrt(6/(fan_in+fan_out)), +...) with g = gain
 *   XAVIER_NORMAL   N(0, g*sqrt(2/(fan_in+fan_out))) with g = gain
 *   ZEROS / ONES / CONSTANT (value a)
 * tiga stores linear weights as [in, out], so for shape [..., in, out] with
 * receptive = product of the leading dims: fan_in = in * receptive, fan_out = out * receptive;
 * a 1-D shape has fan_in = fan_out = its length. */
typedef enum tg_init_kind {
  TG_INIT_ZEROS = 0,
  TG_INIT_ONES = 1,
  TG_INIT_CONSTANT = 2,
  TG_INIT_NORMAL = 3,
  TG_INIT_UNIFORM = 4,
  TG_INIT_XAVIER_UNIFORM = 5,
  TG_INIT_XAVIER_NORMAL = 6
} tg_init_kind;

typedef struct tg_init_options {
  size_t struct_size; /* tg_init_options_init */
  tg_init_kind kind;  /* init: TG_INIT_ZEROS */
  double a, b;        /* init: 0, 1 */
  double gain;        /* XAVIER_*: init 1 */
  uint64_t seed;      /* init: 0 */
} tg_init_options;
TG_API void tg_init_options_init(tg_init_options *opts);

/* Fills a host buffer of numel elements of dtype (F32 or F64) per *init and the given shape;
 * dst_bytes must be numel * dtype size. */
TG_API tg_status tg_init_fill(const tg_init_options *init, tg_dtype dtype, int ndim, const int64_t *shape, void *dst,
                              size_t dst_bytes);
/* tg_tape_parameter with values from an initializer. */
TG_API tg_status tg_tape_parameter_init(tg_tape *tape, tg_dtype dtype, int ndim, const int64_t *shape,
                                        const tg_init_options *init, unsigned flags, tg_id *out);

/* ---- reading and writing values */

/* Shape query: *ndim and shape[0..ndim-1]; shape has room for shape_cap entries (TG_MAX_DIMS
 * always suffices; fewer than ndim is TG_ERR_INVALID_ARGUMENT). */
TG_API tg_status tg_tape_shape(tg_tape *tape, tg_id id, int *ndim, int64_t *shape, int shape_cap);
TG_API tg_status tg_tape_dtype(tg_tape *tape, tg_id id, tg_dtype *out);
TG_API tg_status tg_tape_numel(tg_tape *tape, tg_id id, int64_t *out);
/* Copies the value into dst (exactly numel * dtype size bytes expected in dst_bytes). */
TG_API tg_status tg_tape_read(tg_tape *tape, tg_id id, void *dst, size_t dst_bytes);
/* Copies the gradient (same dtype and size as the value) into dst; zeros when the value has
 * received no gradient. */
TG_API tg_status tg_tape_read_grad(tg_tape *tape, tg_id id, void *dst, size_t dst_bytes);
/* Overwrites a parameter or input value (e.g. loading a checkpoint). Not allowed on op
 * results or borrowed inputs (TG_ERR_STATE). Bumps the value's version (see tg_tape_backward). */
TG_API tg_status tg_tape_write(tg_tape *tape, tg_id id, const void *src, size_t src_bytes);
/* Reads a one-element value of any float dtype as a double (a loss). */
TG_API tg_status tg_tape_scalar(tg_tape *tape, tg_id id, double *out);

/* Lists parameter ids in a fixed order (creation order when every parameter is created before the
 * first step value; slots freed by tg_tape_reset are reused otherwise): writes min(count, cap)
 * ids, *count = total. tg_tape_save / tg_tape_load use the same order. */
TG_API tg_status tg_tape_parameters(tg_tape *tape, tg_id *ids, size_t cap, size_t *count);

/* ---- parameter names (checkpoints match parameters by name) */

/* Longest parameter name, in bytes without the NUL. */
#define TG_NAME_MAX 200
/* Names a parameter (renaming is allowed). name: NUL-terminated, 1..TG_NAME_MAX bytes, each
 * printable ASCII (0x21..0x7e) other than '"' and '\\', e.g. "h.0.attn.wq". Reserved (refused):
 * "__metadata__", names ending in ".opt_m", ".opt_v", ".opt_step" or ".flags" (a checkpoint's
 * optimizer state and metadata keys), and "param.<digits>" (the default names). A name another
 * parameter of the tape holds is TG_ERR_INVALID_ARGUMENT naming that parameter; a step value
 * is TG_ERR_STATE. An unnamed parameter is called "param.<k>", k its position in
 * tg_tape_parameters order (so unnamed parameters match by position, as before names). */
TG_API tg_status tg_tape_set_name(tg_tape *tape, tg_id id, const char *name);
/* Writes the parameter's name (given or default) into buf as snprintf does: at most cap bytes,
 * NUL-terminated when cap > 0; *len (may be NULL) receives the full length without the NUL.
 * buf may be NULL with cap 0 to learn the length. */
TG_API tg_status tg_tape_name(tg_tape *tape, tg_id id, char *buf, size_t cap, size_t *len);
/* The id of the parameter called `name` (given or default name); TG_ERR_INVALID_ID when the
 * tape has none (the message says so). */
TG_API tg_status tg_tape_find_parameter(tg_tape *tape, const char *name, tg_id *out);

/* ---- zero-copy export (DLPack)
 * A value's or gradient's memory as a DLPack DLManagedTensor (DLPack 0.8 ABI, the
 * "dltensor" capsule of PyTorch, CuPy, JAX and NumPy; include "tiga_dlpack.h" for the struct
 * definitions, or dlpack.h itself). No copy: dl_tensor.data points at the tape's buffer, with
 * explicit row-major strides. The tensor holds a reference to the tape (tiga.h top:
 * lifetimes); its deleter drops it and may run on any thread. Call the deleter exactly once.
 * What stays valid (the memory rule): the memory stays allocated until the deleter runs. Its
 * contents are those of the value or gradient until
 *   - step values (inputs, op results) and their gradients: tg_tape_reset (the step memory is
 *     then reused; after reset the tensor reads unspecified bytes); a borrowed input exported on
 *     its own side is the caller's buffer itself, valid while the caller keeps it;
 *   - parameters and their gradients: the next write to that side, which updates the view in
 *     place (optimizer steps, tg_tape_write, tg_tape_load, backward accumulating into a
 *     gradient, tg_tape_zero_grad zeroing it at its next use); a write that lands on the other
 *     side (host vs device) leaves the view stale.
 * Writing through the tensor is allowed only into a parameter or its gradient (e.g. an
 * optimizer of another library), on the side exported, before the next tiga call on the tape.
 * Device tensors are ready for any stream: the export waits for the runtime's device work.
 * flags: TG_EXPORT_GRAD: the gradient (the value must require grad; created zero-filled when
 * no gradient has arrived yet); TG_EXPORT_HOST / TG_EXPORT_DEVICE: that side, copied there first
 * when it is not current (DEVICE on a host-only runtime: TG_ERR_NO_DEVICE); neither: the side
 * that holds the current bytes (the device when both do). */
#define TG_EXPORT_GRAD 0x1u
#define TG_EXPORT_HOST 0x2u
#define TG_EXPORT_DEVICE 0x4u
struct DLManagedTensor;
TG_API tg_status tg_tape_export_dlpack(tg_tape *tape, tg_id id, unsigned flags, struct DLManagedTensor **out);
/* Where tg_tape_export_dlpack with these flags would export, without exporting (DLPack's
 * __dlpack_device__): *memory and *device (either may be NULL). */
TG_API tg_status tg_tape_export_location(tg_tape *tape, tg_id id, unsigned flags, tg_memory *memory, int *device);

/* ---- reverse mode */

/* Reverse sweep from a one-element value that depends on something requiring grad.
 * Gradients of leaves (parameters, inputs with TG_REQUIRES_GRAD) accumulate across calls
 * until tg_tape_zero_grad. A second backward over the same nodes (before reset) is allowed:
 * intermediate gradients are recomputed from zero and leaf gradients accumulate again, as
 * PyTorch's retain_graph=True.
 * Versions (PyTorch's saved-tensor check): every value has a version, bumped by each write of its
 * data after creation — tg_tape_write, tg_tape_load, an optimizer step that updates it. A node
 * remembers its inputs' versions when it is recorded; before anything accumulates, backward
 * checks every node it will run and refuses (TG_ERR_STATE, nothing changed) when an input was
 * rewritten since, naming the value (slot and id), the node (#index), its op and both versions. So
 * a weight rewritten after the forward, an optimizer step between two backwards, or index inputs
 * (embedding ids, targets) rewritten after the forward never give a silently wrong gradient. The
 * check covers every input of a node, whether its backward reads it or not. (Memory the library
 * does not own — a borrowed external buffer — is outside it.) */
TG_API tg_status tg_tape_backward(tg_tape *tape, tg_id loss);
/* The vector-Jacobian product: the reverse sweep from a value y of any shape, seeded with the
 * gradient grad_y (a value of y's shape and dtype) instead of a loss's 1 — PyTorch's
 * y.backward(grad_y). Accumulation as tg_tape_backward. When y is an op result its gradient is
 * grad_y's storage itself for the sweep (no copy; tg_tape_read_grad of y reads grad_y's bytes). */
TG_API tg_status tg_tape_backward_with(tg_tape *tape, tg_id y, tg_id grad_y);
/* Sets every leaf gradient (parameters and inputs) to zero. */
TG_API tg_status tg_tape_zero_grad(tg_tape *tape);

/* Gradient-ready hook (for data-parallel training: train/comm.c overlaps the gradient all-reduce
 * with the rest of the backward through it; any caller may use it). During every reverse sweep
 * (tg_tape_backward, tg_tape_backward_with) the tape calls fn(tape, TG_NO_ID, user) once before
 * any gradient is computed, then fn(tape, param, user) exactly once for each parameter the sweep
 * may add into, as soon as no later node of the sweep can add into it (its gradient is final; on
 * a CUDA runtime the work that computes it is queued on tg_runtime_cuda_stream, so a reader on
 * another stream must order itself after that stream first). Parameters whose last possible
 * contributor was skipped by the sweep are reported when the sweep ends. A sweep that fails stops
 * calling fn. fn must not call functions on this tape or its runtime. One hook per tape; fn NULL
 * removes it (user is then ignored). */
typedef void (*tg_grad_ready_fn)(tg_tape *tape, tg_id param, void *user);
TG_API tg_status tg_tape_set_grad_ready_hook(tg_tape *tape, tg_grad_ready_fn fn, void *user);

/* ---- explain */

/* Renders the tape as text, one line per node:
 *   #node  op  provider  in=[vA,vB]  -> vC [shape] dtype  saved=N  [h2d=.. d2h=..]  [details]
 * Values appear as v<slot>, the low 26 bits of their tg_id; saved = bytes kept for backward
 * beyond the node's inputs and outputs; h2d/d2h = host<->device copies the node caused.
 * Writes at most cap bytes (always NUL-terminated if cap > 0) and sets *len (may be NULL) to
 * the full length without the NUL, as snprintf. */
TG_API tg_status tg_tape_explain(tg_tape *tape, char *buf, size_t cap, size_t *len);
/* Number of nodes and total saved-for-backward bytes of the current tape. */
TG_API tg_status tg_tape_stats(tg_tape *tape, size_t *nodes, size_t *saved_bytes);

/* ---------------------------------------------------------------- ops
 * Every op returns the new value's id, or TG_NO_ID with a sticky error (see top).
 * Float ops take F32 or F64 on the HOST provider; all float inputs of one op share a dtype.
 * Broadcasting (NumPy's rule, symmetric in the operands): add/sub/mul align the two shapes from
 * the right; in each dim the sizes must be equal, or one of them 1 or missing (a scalar, ndim 0,
 * goes with anything), and the result takes the larger size: [2, 3] (+) [1, 2, 3] is [1, 2, 3],
 * [3, 1] (+) [1, 4] is [3, 4], [E, 64] (*) [E, 1] scales each row. A pair that does not broadcast
 * is TG_ERR_SHAPE naming both shapes and the first dim (counted from the left of the result) that
 * disagrees. Gradients sum over the dims an operand was broadcast along.
 */

/* y = x · W + b. x [..., in], W [in, out], b [out] or TG_ABSENT (no bias). y [..., out]. */
TG_API tg_id tg_linear(tg_tape *tape, tg_id x, tg_id w, tg_id b);
/* Batched matrix product. a [..., M, K], b [..., K, N] with equal batch dims, or b 2-D
 * [K, N] shared by all batches. Both at least 2-D. Result [..., M, N]. */
TG_API tg_id tg_matmul(tg_tape *tape, tg_id a, tg_id b);

TG_API tg_id tg_add(tg_tape *tape, tg_id a, tg_id b);
TG_API tg_id tg_sub(tg_tape *tape, tg_id a, tg_id b);
TG_API tg_id tg_mul(tg_tape *tape, tg_id a, tg_id b);
/* y = s * x. */
TG_API tg_id tg_scale(tg_tape *tape, tg_id x, double s);

TG_API tg_id tg_relu(tg_tape *tape, tg_id x);
/* y = x for x > 0, slope * x otherwise. */
TG_API tg_id tg_leaky_relu(tg_tape *tape, tg_id x, double slope);
/* ELU: y = x for x > 0, alpha * (exp(x) - 1) otherwise (alpha > 0; GAT uses 1). */
TG_API tg_id tg_elu(tg_tape *tape, tg_id x, double alpha);
/* GPT-2's tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Value and gradient are
 * finite for every finite x (where tanh saturates the gradient is exactly 1 or 0). */
TG_API tg_id tg_gelu(tg_tape *tape, tg_id x);
TG_API tg_id tg_tanh(tg_tape *tape, tg_id x);
/* Softmax over the last dim. */
TG_API tg_id tg_softmax(tg_tape *tape, tg_id x);
/* Layer norm over the last dim n: (x - mean) / sqrt(var + eps) * w + b, biased variance;
 * w, b of shape [n]. eps > 0 (PyTorch default 1e-5). */
TG_API tg_id tg_layernorm(tg_tape *tape, tg_id x, tg_id w, tg_id b, double eps);
/* Rows of table [V, D] picked by ids (I32, any shape, each in [0, V)): result [ids..., D]. */
TG_API tg_id tg_embedding(tg_tape *tape, tg_id table, tg_id ids);
/* Same elements, new shape; one entry may be -1 (inferred). No copy: the result shares x's storage
 * (x an op result, a parameter or an input). For a parameter or an input the result reads x's
 * current bytes while x is unchanged; once x is rewritten (tg_tape_write, tg_tape_load, an
 * optimizer step), reading the result or running a backward through a node that read it is
 * TG_ERR_STATE (reshape again after the write), never the new bytes under the old name. */
TG_API tg_id tg_reshape(tg_tape *tape, tg_id x, int ndim, const int64_t *shape);
/* Swaps dims d0 and d1 (negative dims count from the end). */
TG_API tg_id tg_transpose(tg_tape *tape, tg_id x, int d0, int d1);
/* Concatenates n >= 1 values along the last dim; all other dims equal. */
TG_API tg_id tg_concat(tg_tape *tape, int n, const tg_id *xs);
/* Columns [start, start + len) of the last dim. */
TG_API tg_id tg_slice(tg_tape *tape, tg_id x, int64_t start, int64_t len);
/* Splits the last dim into n pieces of the given sizes (summing to it); writes n ids to
 * outs and returns outs[0] (TG_NO_ID on failure, outs then all TG_NO_ID). */
TG_API tg_id tg_split(tg_tape *tape, tg_id x, int n, const int64_t *sizes, tg_id *outs);
/* Sum / mean of all elements: a scalar (ndim 0). */
TG_API tg_id tg_sum(tg_tape *tape, tg_id x);
TG_API tg_id tg_mean(tg_tape *tape, tg_id x);
/* Sum over the last dim: x [..., n] -> [...] (a 1-D x gives a scalar). For a sum of products
 * (e.g. GAT's per-head score) use tg_dot_last, one node instead of two. */
TG_API tg_id tg_sum_last(tg_tape *tape, tg_id x);
/* Dot product over the last dim: y[...] = sum_c a[..., c] b[..., c]. The last dims are equal
 * (n >= 1); the leading dims broadcast by NumPy's rule (y's shape is that of broadcasting
 * a.shape[:-1] with b.shape[:-1]; two 1-D values give a scalar). a and b are the same float dtype.
 * Gradients of a broadcast operand are summed in a fixed order (the same bits every run). E.g.
 * GAT's per-head score e[i, h] = sum_c z[i, h, c] a[h, c] is tg_dot_last(z [N, H, C], a [H, C]). */
TG_API tg_id tg_dot_last(tg_tape *tape, tg_id a, tg_id b);
/* Mean cross-entropy of logits [..., C] against I32 targets [...] (each in [0, C) or equal to
 * ignore_index). Rows whose target is ignore_index contribute nothing and are not counted in
 * the mean; if every row is ignored the loss is 0 (PyTorch gives NaN). Pass TG_NO_IGNORE to
 * ignore nothing. Scalar result. */
#define TG_NO_IGNORE INT32_MIN
TG_API tg_id tg_cross_entropy(tg_tape *tape, tg_id logits, tg_id targets, int32_t ignore_index);
/* Mean of (a - b)^2 over all elements; same shapes. Scalar result. */
TG_API tg_id tg_mse(tg_tape *tape, tg_id a, tg_id b);
/* Inverted dropout: y = x * mask / keep with mask ~ Bernoulli(keep) drawn from the tape's RNG
 * (tg_tape_set_seed) and a per-tape call counter; keep in (0, 1]; keep == 1 is the identity.
 * In no-grad mode dropout is the identity (inference). tg_tape_reset restarts the call counter,
 * so a training loop calls tg_tape_set_seed(tape, seed + step) each step for fresh masks (and
 * gets reproducible ones). The mask is cuRAND's Philox4x32-10 stream (seed = tape seed,
 * subsequence = call counter), one 32-bit word w per element: element i (row-major) is kept iff
 * w_i * 2^-32 < keep. HOST and CUDA draw the same mask bit for bit, and backward regenerates it
 * (nothing is saved). */
TG_API tg_id tg_dropout(tg_tape *tape, tg_id x, double keep);

/* Converts to another float dtype (f32, f64, f16, bf16; round to nearest even). The gradient
 * flows back converted to the input's dtype. Mixed precision: keep f32 parameters and cast them
 * to bf16 for the matmuls, as autocast does. */
TG_API tg_id tg_cast(tg_tape *tape, tg_id x, tg_dtype dtype);

/* ---------------------------------------------------------------- relations
 * A relation says which key j each query i may attend to (seed 000: the mask is the relation),
 * or, read as a graph, which edges (j -> i) lead into destination i from source j.
 * Built once, validated once, usable by many nodes of any tape of the same runtime. Index
 * arrays are copied. Sizes: nq queries (destinations), nk keys (sources) per batch entry.
 * Device form: on a CUDA runtime, what kernels need (CSR and its transpose, the mask's bitmask
 * and tile summary, cu_seqlens) is built and uploaded once, the first time a node needs it,
 * kept with the relation (counted in tg_runtime_memory) and freed with it; a fixed relation
 * costs no host->device copy after its first use.
 * Lifetime: the relation holds a reference to its runtime; nodes that use it hold references
 * to it, so tg_relation_destroy may be called at any time after the last op call that names it.
 * Edge order (graph ops, tg_relation_read_csr): the allowed pairs of a batch entry,
 * destination-major (by i), sources j ascending within a row.
 */
typedef struct tg_relation tg_relation;

typedef enum tg_relation_kind {
  TG_REL_DENSE = 0,  /* every pair */
  TG_REL_CAUSAL = 1, /* j <= i + nk - nq (bottom-right aligned when nq != nk) */
  TG_REL_MASK = 2,   /* boolean mask [nq, nk] or [batch, nq, nk], nonzero = allowed */
  TG_REL_VARLEN = 3, /* packed sequences (B = 1): block diagonal from cu_seqlens */
  TG_REL_CSR = 4,    /* general: row_ptr [nq + 1], col_idx [nnz], sorted and unique per row */
  TG_REL_CONCAT = 5  /* block-diagonal concatenation of relations */
} tg_relation_kind;

TG_API tg_status tg_relation_dense(tg_runtime *rt, int64_t nq, int64_t nk, tg_relation **out);
TG_API tg_status tg_relation_causal(tg_runtime *rt, int64_t nq, int64_t nk, tg_relation **out);
/* batch 0: one [nq, nk] mask shared by every batch entry; batch >= 1: [batch, nq, nk].
 * mask_bytes = (batch ? batch : 1) * nq * nk. */
TG_API tg_status tg_relation_mask(tg_runtime *rt, int64_t batch, int64_t nq, int64_t nk, const uint8_t *mask,
                                  size_t mask_bytes, tg_relation **out);
/* n_seqs >= 1 packed sequences; cu_seqlens_q [n_seqs + 1] starts at 0 and strictly increases
 * (every sequence has length >= 1); cu_seqlens_k likewise (NULL with 0 bytes: same as q). Each
 * *_bytes is (n_seqs + 1) * 4. causal: inside each sequence, key j allowed for query i when
 * j <= i + len_k - len_q (bottom-right). */
TG_API tg_status tg_relation_varlen(tg_runtime *rt, int n_seqs, const int32_t *cu_seqlens_q, size_t cu_seqlens_q_bytes,
                                    const int32_t *cu_seqlens_k, size_t cu_seqlens_k_bytes, int causal,
                                    tg_relation **out);
/* General sparse relation: row_ptr [nq + 1] (row_ptr_bytes = (nq + 1) * 8) from 0,
 * non-decreasing; col_idx [nnz = row_ptr[nq]] (col_idx_bytes = nnz * 4), strictly increasing
 * within each row, each in [0, nk). */
TG_API tg_status tg_relation_csr(tg_runtime *rt, int64_t nq, int64_t nk, const int64_t *row_ptr, size_t row_ptr_bytes,
                                 const int32_t *col_idx, size_t col_idx_bytes, tg_relation **out);
/* Part p's queries and keys follow those of part p-1 (offsets add up); nothing crosses parts.
 * The parts are copied: they may be destroyed right after. */
TG_API tg_status tg_relation_concat(tg_runtime *rt, int n, tg_relation *const *parts, tg_relation **out);
/* Drops the caller's reference (tiga.h top: lifetimes). NULL is a no-op. */
TG_API void tg_relation_destroy(tg_relation *rel);
/* kind, sizes and the number of allowed pairs (per batch entry; for a per-batch mask, summed
 * over batch entries). Any out pointer may be NULL. */
TG_API tg_status tg_relation_info(const tg_relation *rel, tg_relation_kind *kind, int64_t *nq, int64_t *nk,
                                  int64_t *allowed_pairs);
/* Reads any relation back as destination-major CSR (edge order above) for batch entry `batch`
 * (0 unless the relation is a per-batch mask): row_ptr [nq + 1] (row_ptr_bytes = (nq + 1) * 8);
 * col_idx [row_ptr[nq]] (col_idx_bytes = that * 4), or col_idx NULL with 0 bytes to learn the
 * row pointers (and so the edge count) first. */
TG_API tg_status tg_relation_read_csr(const tg_relation *rel, int64_t batch, int64_t *row_ptr, size_t row_ptr_bytes,
                                      int32_t *col_idx, size_t col_idx_bytes);

/* Radius graphs (seed 000's Graph.radius): destination i lists every source j with
 *   d2(i, j) = sum_d (p_j,d - p_i,d)^2 <= cutoff^2,
 * each difference, square and sum (in dimension order) and cutoff^2 a float64 operation rounded
 * once, never fused into an FMA — so the host and the GPU builders agree bit for bit, also exactly
 * at the cutoff. Positions are [n, dim] row-major, dim 1..3, f32 or f64 (converted exactly).
 * Built with a cell list (O(n) expected) on the GPU when the runtime has one, on the host otherwise;
 * the result is a TG_REL_CSR relation (columns ascending per row). A square graph (pos_src NULL
 * with 0 bytes and n_src 0: the sources are the destinations) lists i -> i only with
 * TG_RADIUS_SELF_LOOPS; a duplicate point j != i at distance 0 is always listed.
 * Errors: non-finite positions (the message names the first such point), cutoff not finite or
 * <= 0, dim, dtype, sizes, byte counts, options -> TG_ERR_INVALID_ARGUMENT. */
#define TG_RADIUS_SELF_LOOPS 0x1u
typedef struct tg_radius_options {
  size_t struct_size;    /* tg_radius_options_init */
  int64_t max_neighbors; /* init 0: unlimited; k > 0 keeps the k nearest of each row by (d2, j),
                            ties to the smaller index, a self loop counting with d2 = 0 */
  unsigned flags;        /* init 0; TG_RADIUS_SELF_LOOPS (square graphs only) */
  int64_t *perm_out;     /* init NULL; else receives n_dst int64: a spatial-sort (Morton order)
                            permutation of the destination points, perm[r] = the point of rank r,
                            that a user can apply to the nodes for locality (host/radius.h defines
                            it exactly; host and GPU give the same) */
  size_t perm_out_bytes; /* n_dst * 8 when perm_out is set */
} tg_radius_options;
TG_API void tg_radius_options_init(tg_radius_options *opts);
/* From host positions. opts may be NULL (init defaults). */
TG_API tg_status tg_relation_radius(tg_runtime *rt, int dim, tg_dtype dtype, int64_t n_dst, const void *pos_dst,
                                    size_t pos_dst_bytes, int64_t n_src, const void *pos_src, size_t pos_src_bytes,
                                    double cutoff, const tg_radius_options *opts, tg_relation **out);
/* From tape values [n, dim] (f32 / f64), read where they live: positions produced on the GPU are
 * not copied to the host. pos_src TG_ABSENT: square graph. The relation belongs to the tape's
 * runtime; the positions are read now, the relation does not depend on them afterwards. */
TG_API tg_status tg_relation_radius_value(tg_tape *tape, tg_id pos_dst, tg_id pos_src, double cutoff,
                                          const tg_radius_options *opts, tg_relation **out);

/* ---------------------------------------------------------------- attention
 * out[b, i, h, :] = sum_j softmax_j(s_ij) v[b, j, h / (Hq/Hkv), :] over the keys j that the
 * relation allows for query i, s_ij = scale * <q[b,i,h,:], k[b,j,h/(Hq/Hkv),:]>.
 *   q [B, Nq, Hq, D], k [B, Nk, Hkv, D], v [B, Nk, Hkv, Dv]; Hq a multiple of Hkv (GQA/MQA).
 *   out [B, Nq, Hq, Dv] in q's dtype; lse [B, Hq, Nq] f32 (log-sum-exp of the scaled scores).
 * A query with no allowed key outputs 0, receives 0 gradient, and has lse = -inf. A blocked
 * pair contributes nothing to numerator or denominator.
 * NaN-free domain. HOST: no NaN in out or lse for any finite inputs and scale. Scores that overflow
 * to +-inf (f64 q, k ~ 1e160, or scale ~ 1e308) are taken as limits: a row whose largest score is
 * +inf weights its +inf keys equally (lse = +inf) and its scores get zero gradient; a row whose
 * scores are all -inf is treated as a row with no allowed key. HOST gradients are NaN-free as well
 * when the incoming gradient is finite and no product scale * p * (dout . v) overflows. CUDA
 * providers: no NaN when every score scale * q . k is finite in f32 (|score| < 3.4e38).
 * Providers: HOST (f32/f64, every relation), CUDA_COMPOSED (cuBLAS + masked softmax; saves the
 * probabilities), CUDA_FUSED (online softmax; saves only lse; f16/bf16/f32). */
/* Attention's default scale 1/sqrt(D) (D from the call): the value tg_attention_options_init and
 * tg_mha_options_init store in `scale`. Any other scale must be > 0. */
#define TG_SCALE_AUTO (-1.0)
typedef struct tg_attention_options {
  size_t struct_size;           /* tg_attention_options_init */
  double scale;                 /* > 0, or TG_SCALE_AUTO (init): 1/sqrt(D) */
  double block_prune_threshold; /* init 0: exact. (0, 1]: tile pruning (CUDA_FUSED forward, dense
                                   and causal only); elsewhere TG_ERR_UNSUPPORTED */
  tg_id *lse_out;               /* init NULL; else receives the id of the lse value */
  double dropout_keep;          /* attention-probability dropout keep probability in (0, 1];
                                   init 1: none (see below) */
} tg_attention_options;
TG_API void tg_attention_options_init(tg_attention_options *opts);
/* Attention dropout (dropout_keep = keep in (0, 1); 1 = none): inverted dropout on the normalised weights,
 *   out_i = sum_j (p_ij m_ij / keep) v_j,  p = softmax over the allowed keys (the denominator
 *   uses every allowed key, dropped or not), m_ij ~ Bernoulli(keep); lse is unchanged.
 * Mask bit of element (b, h, i, j): with R = (b*Hq + h)*Nq + i (for varlen: packed row and key
 *   indices, B = 1), kept iff w[2 (R mod 2) + (j mod 2)] * 2^-32 < keep, where
 *   w = Philox4x32-10(key = tape seed, ctr_lo = floor(R/2) * ceil(Nk/2) + floor(j/2),
 *   ctr_hi = c | 2^63) -- cuRAND's Philox stream (host/philox.h), one block per 2x2 patch of
 *   rows and keys; c = the tape's RNG call counter (the one tg_dropout uses; bit 63 keeps the streams apart),
 *   taken and incremented once per tg_attention call with keep in (0, 1), in no-grad mode too.
 * The backward regenerates the mask (nothing extra is saved). In no-grad mode the dropout is off
 * (inference), as in tg_dropout. keep NaN, <= 0 or > 1: TG_ERR_INVALID_ARGUMENT. Every provider
 * implements it; it does not combine with block_prune_threshold (TG_ERR_UNSUPPORTED). */

/* opts may be NULL (the init defaults). */
TG_API tg_id tg_attention(tg_tape *tape, tg_id q, tg_id k, tg_id v, const tg_relation *rel,
                          const tg_attention_options *opts);

/* Multi-head attention in TorchLean's structure. x [B, n, dModel]; Wq [dModel, Hq*D],
 * Wk [dModel, Hkv*D], Wv [dModel, Hkv*Dv], Wo [Hq*Dv, dModel]. Q = x Wq etc. with the batch
 * folded into the rows, (batch, head) as the attention batch, then heads concatenated and
 * projected by Wo. Result [B, n, dModel]. Recorded as projection nodes plus one attention node
 * whose provider is opts->attention_provider (AUTO: the tape's provider). */
typedef struct tg_mha_options {
  size_t struct_size;             /* tg_mha_options_init */
  int heads_q, heads_kv;          /* Hq, Hkv: required, each >= 1 (init 0: refused until set) */
  int causal;                     /* init 0; nonzero: causal relation (ignored when rel is set) */
  const tg_relation *rel;         /* init NULL; else a relation over (n, n), e.g. a boolean mask */
  tg_provider attention_provider; /* init AUTO: the tape's current provider */
  double scale;                   /* init TG_SCALE_AUTO (1/sqrt(D)); else > 0 */
  double attention_dropout_keep;  /* tg_attention_options.dropout_keep; init 1: none */
} tg_mha_options;
TG_API void tg_mha_options_init(tg_mha_options *opts);

TG_API tg_id tg_mha(tg_tape *tape, tg_id x, tg_id wq, tg_id wk, tg_id wv, tg_id wo, const tg_mha_options *opts);

/* ---------------------------------------------------------------- graph ops
 * A relation read as a graph (seed 000: attention is one online-softmax reducer over a relation,
 * for sequences and for graphs). Edges e = (j -> i) are the relation's allowed pairs of batch
 * entry 0, destination-major (by i), sources j ascending within a row; E = tg_relation_info's
 * allowed_pairs. i indexes the destination side (Nq = the relation's nq), j the source side
 * (Nk = nk). Any kind works (a per-batch mask does not: it is several graphs).
 * Per-edge tensors are [E, ...] in that order; per-node tensors [N, ...].
 * Every softmax over a row's edges saves only the row's log-sum-exp lse [H, Nq] (f32; -inf for a
 * row with no edge, whose output is 0 and whose gradient is 0) — never [E, H] weights on the
 * fused path. Gradients are deterministic on every provider: per-source sums walk the relation's
 * transpose in a fixed order (no float atomics), so the same inputs give bit-identical results.
 * dtypes: HOST f32 / f64; CUDA f32 / f16 / bf16 with f32 accumulation. Providers: HOST, and CUDA
 * (for tg_graph_attend and tg_gat_attention: CUDA_FUSED, one kernel that never materialises the
 * weights, or CUDA_COMPOSED, recorded graph ops with [E, ...] intermediates). */
typedef enum tg_graph_side {
  TG_GRAPH_SOURCE = 0, /* x [Nk, ...]: the edge's source j */
  TG_GRAPH_DEST = 1    /* x [Nq, ...]: the edge's destination i */
} tg_graph_side;
/* out [E, ...] with out[e] = x[j] (SOURCE) or x[i] (DEST). */
TG_API tg_id tg_graph_gather(tg_tape *tape, const tg_relation *rel, tg_id x, tg_graph_side side);

typedef enum tg_graph_reduce_kind {
  TG_REDUCE_SUM = 0,
  TG_REDUCE_MEAN = 1,
  TG_REDUCE_MAX = 2 /* per element; the gradient goes to the first (lowest e) arg-max edge */
} tg_graph_reduce_kind;
/* edge_values [E, ...] -> out [Nq, ...]: the reduction over each destination's edges (a row with
 * no edge gives 0). */
TG_API tg_id tg_graph_reduce(tg_tape *tape, const tg_relation *rel, tg_id edge_values, tg_graph_reduce_kind kind);
/* scores [E, H] -> [E, H]: softmax over each destination's edges, per head. */
TG_API tg_id tg_graph_softmax(tg_tape *tape, const tg_relation *rel, tg_id scores);

/* Options of tg_graph_attend, tg_gat_attention and tg_edge_attention. */
typedef struct tg_graph_attention_options {
  size_t struct_size;    /* tg_graph_attention_options_init */
  double negative_slope; /* LeakyReLU slope of the GAT / edge-MLP score (init 0.2) */
  double dropout_keep;   /* attention dropout keep probability in (0, 1]; init 1: none */
  tg_id *lse_out;        /* init NULL; else receives the id of lse [H, Nq] f32 */
  /* tg_edge_attention on CUDA_FUSED (others ignore it; init 0): nonzero drops the per-node products
   * x_src . w1_src and x_dst . w1_dst between the passes — the forward computes them into temporary
   * device memory and frees them after its kernel, the backward computes them again, takes their
   * gradients in temporary memory and frees those too. Nothing of size [N, hidden] then stays on the
   * tape (the node saves lse alone): two products more per step (x_src and x_dst of Fs, Fd columns
   * against w1's hidden: cheap for narrow features), [Nk + Nq, hidden] less held between the
   * passes, and only the node running its backward holds any. Same results to rounding (the
   * products are the same bits; the general hidden-16 geometry fold is not taken with it, the
   * self-attention products below are: folded, made in each pass). */
  int recompute_products;
} tg_graph_attention_options;
TG_API void tg_graph_attention_options_init(tg_graph_attention_options *opts);
/* The online-softmax reducer with a field score: scores [E, H], values [Nk, H, F] ->
 *   out[i, h] = sum_{e = (j -> i)} softmax_e(scores[:, h]) * w_e,h * values[j, h]
 * with w = 1, or with attention dropout w = m / keep, m the mask bit of tg_attention's Philox rule
 * for B = 1, head h, row R = h * Nq + i and key index j (the source) — the same bits on every
 * provider. In no-grad mode dropout is off; the RNG call counter advances as in tg_attention.
 * opts may be NULL (init defaults). */
TG_API tg_id tg_graph_attend(tg_tape *tape, const tg_relation *rel, tg_id scores, tg_id values,
                             const tg_graph_attention_options *opts);
/* Edge geometry: out [E, dim] with out[e] = pos_src[j] - pos_dst[i]; pos_src [Nk, dim], pos_dst
 * [Nq, dim], dim 1..3, same dtype (HOST f32 / f64; CUDA f32 — positions stay f32 when the rest of a
 * model runs in bf16). Differentiable w.r.t. both; for a square graph pass the same value twice. */
TG_API tg_id tg_graph_displacement(tg_tape *tape, const tg_relation *rel, tg_id pos_src, tg_id pos_dst);
/* GAT (Veličković et al.): scores s_e,h = LeakyReLU(e_dst[i, h] + e_src[j, h]) with slope
 * opts->negative_slope, then tg_graph_attend. e_dst [Nq, H], e_src [Nk, H], values [Nk, H, F]
 * -> [Nq, H, F]. CUDA_FUSED stores nothing of size E in either direction. */
TG_API tg_id tg_gat_attention(tg_tape *tape, const tg_relation *rel, tg_id e_dst, tg_id e_src, tg_id values,
                              const tg_graph_attention_options *opts);
/* Edge-MLP attention (seed 000's GAT with a learned edge score): for each edge e = (j -> i),
 *   in_e  = [ pos_src[j] - pos_dst[i] (dim) | x_src[j] (Fs) | x_dst[i] (Fd) | edge_feat[e] (Fe) ]
 *   z_e   = LeakyReLU(in_e . w1 + b1; opts->negative_slope)          [hidden]
 *   s_e,h = z_e . w2[:, h] + b2[h]                                    [H]
 *   out[i, h] = sum_{e = (j -> i)} softmax_e(s[:, h]) * w_e,h * values[j, h]   (tg_graph_attend)
 * Shapes: pos_src [Nk, dim], pos_dst [Nq, dim] (dim 1..3; both TG_ABSENT: no geometry, dim 0),
 * x_src [Nk, Fs] and x_dst [Nq, Fd] (each may be TG_ABSENT: Fs or Fd 0; for self-attention on a
 * square graph pass the same value twice), edge_feat [E, Fe] in edge order or TG_ABSENT,
 * values [Nk, H, F], w1 [dim + Fs + Fd + Fe, hidden] with its rows in that order (geometry rows
 * first, then source, destination and edge-feature rows), b1 [hidden] or TG_ABSENT, w2 [hidden, H],
 * b2 [H] or TG_ABSENT. Result [Nq, H, F]. Gradients reach every input (positions included).
 * opts (NULL: init defaults): negative_slope (init 0.2), dropout_keep (the rule of
 * tg_graph_attend), lse_out.
 * dtypes: one float dtype for every input but the positions; HOST f32 / f64; CUDA f32 / bf16 (f32
 * accumulation), positions f32 on CUDA (also with bf16 features, as tg_graph_displacement).
 * Providers: HOST (reference); CUDA_COMPOSED (recorded graph ops: gather, displacement, concat,
 * linear, leaky_relu, linear, tg_graph_attend's composed form — any size, [E, hidden] tensors);
 * CUDA_FUSED: the feature rows run as per-node GEMMs (x_src . w1_src, x_dst . w1_dst, recorded
 * tg_matmul nodes), one kernel evaluates the rest of the score MLP per edge with an online
 * softmax, the backward replays it per row and per source; it saves lse [H, Nq] only, nothing of
 * size E in either direction. FUSED takes hidden in {16, 32, 64, 128}, H <= 8, F <= 128, Fe <= 16;
 * anything else is TG_ERR_UNSUPPORTED (never a silent fallback; AUTO picks COMPOSED then).
 * In f32 at hidden 16 with positions and both x_src and x_dst, FUSED also folds the geometry rows
 * into those products (x_src . w1_src + pos_src . w1_geom and x_dst . w1_dst - pos_dst . w1_geom),
 * so that no edge multiplies positions; its pre-activation rounding then grows with |pos| rather
 * than with |pos_src[j] - pos_dst[i]| (about 6e-8 |pos| |w1_geom|): keep coordinates near the
 * origin (centre them) when they are large next to the neighbourhood size. The environment
 * variable TIGA_EA_FOLD=0 turns the fold off. Self attention there (x_src and x_dst one value of at
 * most 8 columns, pos_src and pos_dst one value, no edge_feat) computes both folded products in
 * one recorded node ("edge_attention_products": one pass over the nodes each way, instead of two
 * tg_matmul nodes and the fold; TIGA_EA_OWN=0 turns it off) — also at hidden 64 in f32 where the
 * 8-lane kernels below take the call (with recompute_products the node makes them itself in each
 * pass), with the same rounding note.
 * The small f32 case (hidden 16, no geometry left per edge — none, or folded — no edge_feat,
 * H <= 4 and H * F in {4, 8, 16}) runs kernels where one lane evaluates a whole edge; a row is
 * walked by 1..8 lanes (more on small graphs), so a hub row of degree d costs about d / 8 serial
 * edge steps: on graphs with very long rows TIGA_EA_LANES=0 (the general kernels, 32 lanes a row)
 * may be faster. Results are bit-reproducible either way (sums in orders fixed by the sizes).
 * At H 4, F 2 from 2^18 destination rows these kernels re-read the score weights from shared
 * memory at each edge and run two blocks a SM (TIGA_EA_BIG=1 / 0 turns that on / off regardless
 * of size; the same results to rounding).
 * f32 at hidden 64 without edge_feat, H in {1, 2, 4} and H * F in {8, 16, 32, 64} runs kernels where 8
 * lanes share an edge, each with 8 hidden units and H * F / 8 value columns (TIGA_EA_SLICE=0 turns
 * them off); a row is walked by 1..4 such groups (more on small graphs), so a hub row of degree d
 * costs d / 4 to d serial edge steps there.
 * When the node rows the kernels gather reach 16 MiB (U and values rows per source, or V and dout
 * rows per destination), rows and sources are handed out in the relation's locality order (the
 * radius builder's Morton order, else a breadth-first order of the graph, built once and kept with
 * the relation, counted in its device bytes), so that those running together gather nearby rows;
 * the outputs and per-node gradients are the same bits in any order, the weight gradients' sums
 * follow it. TIGA_EA_ORDER=0 / 1 turns it off / on regardless of size. On a square graph the order
 * is graded: each window of 1024 rows of it sorted by degree, so that rows walked together have about
 * one length (built once, kept with the relation; TIGA_EA_GRADE=W another window, 0 none).
 * On that self-attention path, when the lane kernels take the call, there is no dropout or
 * lse_out and the 16 MiB rule holds, the graph is renumbered in that order instead (the renumbered
 * CSR and its transpose are built once on the host and kept with the relation, counted in its
 * device bytes): the products come out in the new order, and so do the value rows (written by the
 * products node when `values` is x_src's own rows, a reshape of it, else by a recorded
 * "rows_renumbered" node), the kernels gather neighbouring rows, and out / dout stay at the
 * caller's row indices. out is the same bits as without it; the per-source gradient sums run in the new order.
 * It holds the renumbered value rows and a renumbered copy of dout during the backward (2 Nq H F
 * floats). TIGA_EA_RENUM=0 / 1 turns it off / on (where it can run) regardless of size.
 * Memory of a FUSED backward: the lane and slice kernels write x_src . w1_src's gradient over that
 * product's own storage (its last reader), and the values' gradient goes straight into the value
 * that `values` is a reshape of (values = x_src viewed as [Nk, H, F] costs no buffer); a second
 * backward through the same recording computes the product again first. */
TG_API tg_id tg_edge_attention(tg_tape *tape, const tg_relation *rel, tg_id pos_src, tg_id pos_dst, tg_id x_src,
                               tg_id x_dst, tg_id edge_feat, tg_id values, tg_id w1, tg_id b1, tg_id w2, tg_id b2,
                               const tg_graph_attention_options *opts);

/* ---------------------------------------------------------------- optimizers
 * Each updates every parameter of the tape that has a gradient, in its own dtype, with state
 * (momentum / moments, step count) kept per parameter across tg_tape_reset. They do not zero
 * the gradients. Each updated parameter's version is bumped (see tg_tape_backward).
 * Found-inf (PyTorch's GradScaler behaviour): before updating anything, a step checks that every
 * gradient it would use is finite. If one is not, the whole step is skipped — no parameter,
 * momentum, moment or step count changes — and the call returns TG_ERR_NONFINITE naming the first
 * such parameter (its position in tg_tape_parameters order and its id); the tape stays usable (the
 * error is not sticky). On CUDA this costs one 4-byte device-to-host read (a wait for the device)
 * per step. */

/* PyTorch's SGD: g = grad + wd * p; buf = momentum * buf + (1 - dampening) * g (buf = g at the
 * first step); g = nesterov ? g + momentum * buf : buf; p -= lr * g.  (wd skipped for
 * TG_NO_WEIGHT_DECAY parameters.) */
typedef struct tg_sgd_options {
  size_t struct_size;                           /* tg_sgd_options_init */
  double lr, momentum, dampening, weight_decay; /* init 1e-3, 0, 0, 0 (PyTorch's) */
  int nesterov;                                 /* init 0 */
} tg_sgd_options;
TG_API void tg_sgd_options_init(tg_sgd_options *opts);
TG_API tg_status tg_sgd_step(tg_tape *tape, const tg_sgd_options *opts);

/* AdamW (Loshchilov & Hutter), PyTorch's form: t += 1; p *= 1 - lr * wd (decoupled, skipped for
 * TG_NO_WEIGHT_DECAY parameters); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps). */
typedef struct tg_adamw_options {
  size_t struct_size; /* tg_adamw_options_init */
  double lr, beta1, beta2, eps, weight_decay;
} tg_adamw_options;
/* lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 (PyTorch's defaults). */
TG_API void tg_adamw_options_init(tg_adamw_options *opts);
TG_API tg_status tg_adamw_step(tg_tape *tape, const tg_adamw_options *opts);

/* PyTorch's Adam (torch.optim.Adam) with coupled L2 weight decay, which the GAT recipe uses:
 * t += 1; g = grad + wd * p (wd skipped for TG_NO_WEIGHT_DECAY parameters); m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps). */
typedef struct tg_adam_options {
  size_t struct_size; /* tg_adam_options_init */
  double lr, beta1, beta2, eps, weight_decay;
} tg_adam_options;
/* lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0 (PyTorch's defaults). */
TG_API void tg_adam_options_init(tg_adam_options *opts);
TG_API tg_status tg_adam_step(tg_tape *tape, const tg_adam_options *opts);

/* Scales all parameter gradients so that their global L2 norm is at most max_norm
 * (max_norm > 0); *total_norm (may be NULL) receives the norm before clipping. A non-finite norm
 * leaves the gradients as they are (the next optimizer step then skips: see found-inf). */
TG_API tg_status tg_clip_grad_norm(tg_tape *tape, double max_norm, double *total_norm);

/* Checkpoints, in the safetensors format (readable by the safetensors package, PyTorch, NumPy):
 * an 8-byte little-endian header length N, N bytes of JSON, then the tensors' bytes.
 *   tensors: "<name>" the parameter's value (tg_tape_name: given or default name), and when the
 *     optimizer state exists "<name>.opt_m" (first moment / momentum) and "<name>.opt_v"
 *     (second moment), each in the parameter's dtype and shape (F32 / F64 / F16 / BF16);
 *   __metadata__ (strings): "tiga.format" "1", "tiga.version" (tg_version_string),
 *     "tiga.step" (the largest optimizer step count), "tiga.fnv1a64" (FNV-1a 64 of the whole
 *     file with these 16 hex digits read as '0's), and per parameter "<name>.opt_step" (its step count) and
 *     "<name>.flags" ("no_weight_decay" or "").
 * Save writes "<path>.tmp", fsyncs it, renames it over path and fsyncs the directory, so a
 * crash never leaves a half-written checkpoint under the real name.
 * Load matches by name: every parameter of the tape must be in the file with its dtype and
 * shape, and every tensor of the file must be a parameter or its state (TG_ERR_SHAPE /
 * TG_ERR_DTYPE naming both sides otherwise); then values, moments and step counts are replaced
 * (a moment missing from the file restarts from zero; "<name>.opt_step" missing: 0). The file
 * is read once into memory and checked whole before anything changes (a failed load leaves
 * the tape as it was): regular files only, every header field bounded (offsets tile the data
 * exactly, step counts 0..2^53, header <= 100 MB), checksum verified when present (files from
 * other writers have none). TG_ERR_IO for unreadable, malformed or corrupt files. */
/* tg_clip_grad_norm with options (PyTorch's clip_grad_norm_). */
typedef struct tg_clip_options {
  size_t struct_size;     /* tg_clip_options_init */
  double max_norm;        /* > 0; init 1 */
  int error_if_nonfinite; /* init 0; nonzero: a NaN / inf total norm fails with TG_ERR_NONFINITE and
                             leaves every gradient unchanged (the norm is then read on the host: one
                             wait for the device on CUDA) */
} tg_clip_options;
TG_API void tg_clip_options_init(tg_clip_options *opts);
/* opts may not be NULL; *total_norm (may be NULL) receives the norm before clipping. */
TG_API tg_status tg_clip_grad_norm_with(tg_tape *tape, const tg_clip_options *opts, double *total_norm);

/* Dynamic loss scaling for f16 training (PyTorch's GradScaler). The loss is multiplied by a scale
 * S before backward so that small f16 gradients do not underflow; the parameter gradients are then
 * divided by S and checked in one pass, and S adapts: a step whose gradients are not all finite
 * multiplies S by backoff_factor (and should be skipped); growth_interval finite steps in a row
 * multiply it by growth_factor (S stays below 2^64). A scaler is plain host state (no runtime, no
 * tape): any tape may use it. Use per step:
 *   tg_id s = tg_loss_scaler_scale(tape, sc, loss);        (records loss * S)
 *   tg_tape_backward(tape, s);
 *   int found_inf;
 *   tg_loss_scaler_unscale(tape, sc, &found_inf);           (grads /= S, found-inf, update S)
 *   if (!found_inf) { clip...; tg_adamw_step(tape, &o); }   (the step would refuse anyway) */
typedef struct tg_loss_scaler tg_loss_scaler;
typedef struct tg_loss_scaler_options {
  size_t struct_size;      /* tg_loss_scaler_options_init */
  double init_scale;       /* > 0, finite; init 65536 (2^16) */
  double growth_factor;    /* > 1; init 2 */
  double backoff_factor;   /* in (0, 1); init 0.5 */
  int64_t growth_interval; /* >= 1; init 2000 */
} tg_loss_scaler_options;
TG_API void tg_loss_scaler_options_init(tg_loss_scaler_options *opts);
/* opts may be NULL (the init defaults). */
TG_API tg_status tg_loss_scaler_create(const tg_loss_scaler_options *opts, tg_loss_scaler **out);
TG_API void tg_loss_scaler_destroy(tg_loss_scaler *scaler);
/* The current scale S and the number of finite steps since the last change of S. */
TG_API tg_status tg_loss_scaler_state(const tg_loss_scaler *scaler, double *scale, int64_t *growth_tracker);
/* Restores a state read with tg_loss_scaler_state, so that a run resumed from a checkpoint goes on
 * with the scale it had (PyTorch's GradScaler.load_state_dict): scale finite and > 0 (as
 * init_scale); 0 <= growth_tracker < the scaler's growth_interval. TG_ERR_INVALID_ARGUMENT otherwise (the
 * scaler unchanged). */
TG_API tg_status tg_loss_scaler_set_state(tg_loss_scaler *scaler, double scale, int64_t growth_tracker);
/* An op: loss * S (recorded like tg_scale; any float value, normally the scalar loss). */
TG_API tg_id tg_loss_scaler_scale(tg_tape *tape, tg_loss_scaler *scaler, tg_id loss);
/* Divides every parameter gradient by S (host: in double; CUDA: by the f32 reciprocal, as PyTorch)
 * and sets *found_inf to 1 when one of them held a NaN or inf (before the division), else 0; then
 * updates S (back-off on found-inf, growth after growth_interval finite steps). One pass over the
 * gradients; on CUDA one 4-byte read back. */
TG_API tg_status tg_loss_scaler_unscale(tg_tape *tape, tg_loss_scaler *scaler, int *found_inf);

/* Checkpoints: every parameter in tg_tape_parameters order with its dtype, shape, value and
 * optimizer state (moments, step count). Load expects the same parameters (count, dtypes,
 * shapes, order) to exist already: TG_ERR_SHAPE / TG_ERR_DTYPE with a message otherwise;
 * TG_ERR_IO for unreadable or malformed files. */
TG_API tg_status tg_tape_save(tg_tape *tape, const char *path);
TG_API tg_status tg_tape_load(tg_tape *tape, const char *path);

/* ---------------------------------------------------------------- data parallel (NCCL)
 * One rank per GPU, one process or one thread per rank, each with its own CUDA runtime. Built when
 * the library was built with NCCL (CMake TIGA_NCCL); otherwise every call that needs NCCL returns
 * TG_ERR_UNSUPPORTED with a message (arguments are still checked first). A host-only runtime is
 * TG_ERR_NO_DEVICE.
 * Rendezvous: rank 0 makes an id (tg_comm_id_create: TG_COMM_ID_BYTES opaque bytes, NCCL's
 * ncclUniqueId) and hands it to the other ranks, e.g. through a file (tg_comm_id_write /
 * tg_comm_id_read) or a pipe (the bytes as they are); every rank then calls tg_comm_create with the
 * same id and nranks, and its own rank.
 * Per step (data parallel):
 *   tg_comm_attach(comm, tape);                    (once: registers the gradient-ready hook)
 *   tg_comm_broadcast_parameters(comm, tape);      (once: every rank starts from rank 0's values)
 *   loop: forward on this rank's batch; tg_tape_backward(tape, loss);  (buckets launch as their
 *         gradients become final, on the comm's own stream)
 *         tg_comm_finish_gradients(comm, tape);     (remaining buckets; the runtime's stream waits)
 *         optimizer step (every rank the same update: the gradients are the ranks' mean)
 * Gradients are reduced in place, in their own dtype, as the mean over the ranks (NCCL's ncclAvg),
 * in buckets of about opts->bucket_bytes over the parameters in reverse tg_tape_parameters order
 * (roughly the order backward finishes them); buckets are launched in that order on every rank, so
 * every rank must use the same options and model.
 * Errors: a rank that dies or stops answering becomes a status, not a hang: the communicator is
 * created non-blocking and every wait polls it with a deadline of opts->timeout_s seconds; at the
 * deadline the communicator is aborted (ncclCommAbort) and the call returns TG_ERR_DEVICE naming
 * what it waited for. An aborted or failed communicator refuses every later call (TG_ERR_STATE);
 * destroy it. libnccl is loaded at the first call that needs it (TIGA_NCCL_LIBRARY, else
 * libnccl.so.2 on the loader's path); when it cannot be loaded those calls return TG_ERR_UNSUPPORTED
 * naming it. */
typedef struct tg_comm tg_comm;
/* Bytes of a rendezvous id (NCCL's ncclUniqueId): plain bytes, copied as they are between
 * processes. */
#define TG_COMM_ID_BYTES 128
/* A fresh id into id (id_bytes = TG_COMM_ID_BYTES). Rank 0 calls it: it opens the bootstrap socket
 * the other ranks connect to, which lives as long as the calling process. */
TG_API tg_status tg_comm_id_create(void *id, size_t id_bytes);
/* Writes the id to path atomically ("<path>.tmp", then a rename), so a reader never sees half of
 * it. Needs no NCCL. */
TG_API tg_status tg_comm_id_write(const void *id, size_t id_bytes, const char *path);
/* Reads an id written by tg_comm_id_write into id (id_bytes = TG_COMM_ID_BYTES), waiting up to
 * timeout_s seconds (>= 0) for the file to appear: TG_ERR_IO when it does not, or is not such a
 * file. Needs no NCCL. */
TG_API tg_status tg_comm_id_read(const char *path, double timeout_s, void *id, size_t id_bytes);

typedef struct tg_comm_options {
  size_t struct_size;  /* tg_comm_options_init */
  double timeout_s;    /* > 0, finite: deadline of every wait (init, collectives); init 600 */
  size_t bucket_bytes; /* >= 1: gradient bytes per all-reduce bucket; init 25 MiB (26214400) */
  int host_wait;       /* init 1: tg_comm_finish_gradients and tg_comm_broadcast_parameters return
                          once the collectives have completed (polled with the deadline); 0: they
                          return once the runtime's stream is ordered after them (a device-side
                          wait; the host does not wait, so a dead peer then shows only at the next
                          tg_comm call or as a hang of the next read) */
} tg_comm_options;
TG_API void tg_comm_options_init(tg_comm_options *opts);
/* Joins the communicator of nranks (>= 1) ranks as rank (0 <= rank < nranks), on rt's CUDA device.
 * id: from rank 0's tg_comm_id_create (id_bytes = TG_COMM_ID_BYTES); the same for every rank.
 * opts may be NULL (init defaults). Waits (up to opts->timeout_s) for every rank to join. The comm
 * holds a reference to rt. *out is NULL on failure. */
TG_API tg_status tg_comm_create(tg_runtime *rt, int nranks, int rank, const void *id, size_t id_bytes,
                                const tg_comm_options *opts, tg_comm **out);
/* Detaches from its tape, aborts collectives in flight (ncclCommAbort when a wait did not
 * finish), frees the communicator and drops its reference to the runtime. NULL is a no-op. */
TG_API void tg_comm_destroy(tg_comm *comm);
/* Message of the last failure on this comm ("" if none). Owned by the comm. */
TG_API const char *tg_comm_error(const tg_comm *comm);
/* This comm's rank and number of ranks (either pointer may be NULL). */
TG_API tg_status tg_comm_rank(const tg_comm *comm, int *rank, int *nranks);
/* Overwrites every parameter of tape (tg_tape_parameters order) with rank 0's value, in place on
 * the device (bumps each version). Every rank must hold the same parameters (count, dtypes,
 * shapes, order); the sizes are compared across the ranks first (TG_ERR_SHAPE otherwise).
 * Optimizer state is not sent. */
TG_API tg_status tg_comm_broadcast_parameters(tg_comm *comm, tg_tape *tape);
/* Registers the comm on tape's gradient-ready hook (tg_tape_set_grad_ready_hook: replaces another
 * hook) and plans the buckets over the tape's parameters as they are now; the comm holds a
 * reference to the tape until tg_comm_detach or destroy. One tape per comm; tape's runtime must be
 * the comm's. Parameters created after attach: attach again. A second backward before
 * tg_comm_finish_gradients (gradient accumulation) is TG_ERR_STATE at finish: detach for the
 * micro-steps that must not reduce, and attach again before the last one. */
TG_API tg_status tg_comm_attach(tg_comm *comm, tg_tape *tape);
TG_API tg_status tg_comm_detach(tg_comm *comm, tg_tape *tape);
/* After the backward: launches the buckets not launched yet (all of them when the comm is not
 * attached to tape, which is then planned as attach does), so that every parameter gradient of
 * tape becomes the mean over the ranks; then orders tape's runtime stream after them (and waits on
 * the host when opts->host_wait). A parameter without a gradient takes part with zeros (its
 * gradient is then created). Every rank calls it once per step. */
TG_API tg_status tg_comm_finish_gradients(tg_comm *comm, tg_tape *tape);

/* ---------------------------------------------------------------- gradcheck */

/* Builds the function under test on `tape` from the input ids (in the order given to
 * tg_gradcheck) and returns the id of a one-element result (or TG_NO_ID on failure). */
typedef tg_id (*tg_gradcheck_fn)(tg_tape *tape, const tg_id *inputs, void *user);

/* One input of tg_gradcheck. The array passed to tg_gradcheck is read with a stride of
 * inputs[0].struct_size, so every element must be initialised by tg_gradcheck_input_init. */
typedef struct tg_gradcheck_input {
  size_t struct_size; /* tg_gradcheck_input_init */
  tg_dtype dtype;     /* F64 for inputs to differentiate; I32 etc. for index inputs */
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  const void *data;   /* numel elements of dtype */
  size_t data_bytes;  /* numel * dtype size */
  int differentiable; /* nonzero: checked (must be F64) */
} tg_gradcheck_input;
/* Zeroes *in and sets struct_size (fill in the rest). */
TG_API void tg_gradcheck_input_init(tg_gradcheck_input *in);

typedef struct tg_gradcheck_options {
  size_t struct_size;   /* tg_gradcheck_options_init */
  double eps;           /* finite-difference step (init 1e-6) */
  double atol;          /* init 1e-5 */
  double rtol;          /* init 1e-3: passes when |a - n| <= atol + rtol * |n| */
  int fast_mode;        /* init 0; nonzero: directional derivatives along random unit directions */
  int fast_directions;  /* directions per input in fast mode (init 4) */
  uint64_t seed;        /* for fast-mode directions (init 0) */
  tg_provider provider; /* provider the callback's ops run on (init AUTO) */
} tg_gradcheck_options;
TG_API void tg_gradcheck_options_init(tg_gradcheck_options *opts);

typedef struct tg_gradcheck_result {
  size_t struct_size; /* tg_gradcheck_result_init (the library writes at most this many bytes) */
  int passed;
  int worst_input;          /* index of the input with the worst element (-1 if none checked) */
  int64_t worst_index;      /* flat element index (fast mode: direction index) */
  double analytic, numeric; /* at the worst element */
  double abs_err;           /* |analytic - numeric| there */
  double excess;            /* abs_err - (atol + rtol |numeric|); > 0 means failure */
  int64_t checked;          /* elements (or directions) compared */
} tg_gradcheck_result;

TG_API void tg_gradcheck_result_init(tg_gradcheck_result *result);
/* Runs fn on a fresh tape of rt, compares the analytic gradient of every differentiable
 * input with central differences in float64. Returns TG_OK when every element passes,
 * TG_ERR_GRADCHECK (message names the worst element) when one fails, another status when the
 * callback or arguments fail. opts may be NULL (the init defaults); result may be NULL. */
TG_API tg_status tg_gradcheck(tg_runtime *rt, tg_gradcheck_fn fn, void *user, int n_inputs,
                              const tg_gradcheck_input *inputs, const tg_gradcheck_options *opts,
                              tg_gradcheck_result *result);

#ifdef __cplusplus
}
#endif

#endif /* TIGA_H */

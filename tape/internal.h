/*
 * tape/internal.h — what ops/ needs from the tape: values, nodes, capsules, memory, errors.
 * Not installed. Kernels (host/, cuda/) never include this file.
 */
#ifndef TIGA_TAPE_INTERNAL_H
#define TIGA_TAPE_INTERNAL_H

#include "tiga.h"

#include "alloc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TGI_MSG_CAP 768

/* ------------------------------------------------------------ errors */

/* Thread-local fallback message (tg_last_error). */
void tgi_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------ arena
 * A bump allocator over a list of chunks. tgi_arena_rewind keeps the memory: when the last
 * step needed several chunks they are replaced by one chunk of the total size, so a steady
 * training loop allocates nothing after its first step. The same code serves host memory
 * and device memory (through the alloc/free callbacks). */
typedef struct tgi_chunk tgi_chunk;
typedef struct tgi_arena {
  tgi_chunk *head;   /* chunk being filled */
  tgi_chunk *chunks; /* all chunks, newest first */
  size_t align;
  size_t in_use;   /* bytes handed out since the last rewind */
  size_t capacity; /* bytes held */
  void *ctx;
  void *(*alloc)(void *ctx, size_t bytes);
  void (*release)(void *ctx, void *p);
} tgi_arena;

void tgi_arena_init(tgi_arena *a, size_t align, void *ctx, void *(*alloc)(void *, size_t),
                    void (*release)(void *, void *));
/* NULL when the underlying allocation fails. */
void *tgi_arena_alloc(tgi_arena *a, size_t bytes);
void tgi_arena_rewind(tgi_arena *a);
/* The unused tail of the chunk being filled (where the next small allocations come from): its
 * start, and its size in *bytes (0 and NULL when there is no chunk). */
void *tgi_arena_tail(const tgi_arena *a, size_t *bytes);
void tgi_arena_free(tgi_arena *a);

/* ------------------------------------------------------------ device layer
 * Implemented by cuda/device.cu when built with CUDA, else by tape/nodevice.c (every call
 * returns TG_ERR_NO_DEVICE). Messages are written into msg (TGI_MSG_CAP bytes). */
typedef struct tgi_device tgi_device;
int tgi_device_compiled(void);
tg_status tgi_device_open(int index, tgi_device **out, char *msg);
void tgi_device_close(tgi_device *dev);
tg_status tgi_device_alloc(tgi_device *dev, size_t bytes, void **out, char *msg);
void tgi_device_free(tgi_device *dev, void *p);
tg_status tgi_device_h2d(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg);
/* Pinned host memory (for the host arena of device runtimes) so uploads of step values are truly
 * asynchronous: tgi_device_h2d_async returns at once and records the device's upload event;
 * tgi_device_h2d_wait blocks until every upload issued so far has landed (call it before the
 * source memory is reused or rewritten). */
tg_status tgi_device_host_alloc(tgi_device *dev, size_t bytes, void **out, char *msg);
void tgi_device_host_free(tgi_device *dev, void *p);
tg_status tgi_device_h2d_async(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg);
tg_status tgi_device_h2d_wait(tgi_device *dev, char *msg);
tg_status tgi_device_d2h(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg);
/* Stream-ordered device -> device copy (no host wait). */
tg_status tgi_device_d2d(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg);
tg_status tgi_device_zero(tgi_device *dev, void *p, size_t bytes, char *msg);
tg_status tgi_device_sync(tgi_device *dev, char *msg);
void tgi_device_memory(const tgi_device *dev, size_t *current, size_t *peak);
void tgi_device_reset_peak(tgi_device *dev);
/* Testing hook behind tg_runtime_inject_alloc_failure (device and pinned host allocations), and
 * its countdown now (-1: disarmed or fired). */
void tgi_device_inject_alloc_failure(tgi_device *dev, int64_t after);
/* TG_OK when [p, p + bytes) is device memory of the device's ordinal (zero-copy inputs); else
 * TG_ERR_INVALID_ARGUMENT with why in msg. */
tg_status tgi_device_check_pointer(tgi_device *dev, const void *p, size_t bytes, char *msg);
int64_t tgi_device_alloc_failure_pending(const tgi_device *dev);
/* Anomaly mode's device check: *flag = max(*flag, tag) when one of the n elements of x (a float
 * dtype) is NaN or +-inf; stream-ordered, nothing waits. */
tg_status tgi_device_flag_nonfinite(tgi_device *dev, tg_dtype dt, const void *x, int64_t n, int32_t tag, int32_t *flag,
                                    char *msg);
/* Handles the CUDA launchers take (opaque to C; see cuda/launch.h). NULL without a device. */
struct CUstream_st;
struct cublasContext;
struct CUstream_st *tgi_device_stream(tgi_device *dev);
struct cublasContext *tgi_device_cublas(tgi_device *dev);
/* cuBLASLt handle and a workspace for it (bytes in *bytes). */
void *tgi_device_cublaslt(tgi_device *dev, void **workspace, size_t *bytes);

/* ------------------------------------------------------------ runtime
 * Reference counted (tiga.h: lifetimes): the caller's handle, each tape and each relation hold
 * one reference; the device is closed when the last one is dropped. */
struct cuda_finite_side;
struct tg_runtime {
  int64_t refs;    /* atomic (tgi_atomic_*): a finalizer may drop a reference from another thread */
  uintptr_t owner; /* debug builds: the thread inside a call on this runtime (TGI_GUARD), 0 if none */
  tgi_device *dev; /* NULL on a host-only runtime */
  int device_index;
  /* anomaly mode's check stream (cuda/finite.h), created with a device runtime unless
   * TIGA_CHECK_FINITE_OVERLAP=0 or its creation failed; NULL: the checks run on the main stream */
  struct cuda_finite_side *nf_side;
  char msg[TGI_MSG_CAP];
};

tg_status tgi_rt_error(tg_runtime *rt, tg_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tgi_rt_retain(tg_runtime *rt);
/* Reference counts (runtime, relation): atomic increments / decrements; returns the new count.
 * Builtins rather than C11 _Atomic so that this header also compiles as CUDA C++ (device.cu). */
static inline int64_t tgi_atomic_add(int64_t *p, int64_t d) { return __atomic_add_fetch(p, d, __ATOMIC_ACQ_REL); }
void tgi_rt_release(tg_runtime *rt);

/* ------------------------------------------------------------ options structs
 * tiga.h's rule: an options struct starts with size_t struct_size. dst holds the init defaults
 * (dst_size = the library's sizeof); the caller's struct src is copied over it up to its
 * struct_size. Returns NULL on success, else why src was refused (static text). */
const char *tgi_opts_copy(void *dst, size_t dst_size, const void *src);

/* ------------------------------------------------------------ values */
enum { TGI_ON_HOST = 1, TGI_ON_DEV = 2 };

/* Bytes of one value or gradient on each side; `valid` says which copies are current. */
typedef struct tgi_buf {
  void *h;
  void *d;
  uint8_t valid;
} tgi_buf;

typedef enum tgi_kind {
  TGI_FREE = 0,
  TGI_INPUT = 1, /* step value from host data */
  TGI_PARAM = 2, /* persistent */
  TGI_RESULT = 3 /* produced by an op */
} tgi_kind;

typedef struct tgi_value {
  uint64_t gen;     /* (tape tag << TGI_GEN_BITS) | the slot's generation (see tgi_make_id) */
  uint64_t version; /* bumped by every write of the data after creation (tgi_value_bump_version) */
  uint8_t kind;
  uint8_t dtype;
  uint8_t ndim;
  bool requires_grad;
  bool has_grad;
  uint32_t flags;
  int64_t shape[TG_MAX_DIMS];
  int64_t numel;
  size_t bytes;
  int32_t producer;    /* node index, -1 for leaves */
  bool retired;        /* free slot whose generation is exhausted: never handed out again */
  bool sweep_mark;     /* backward's pre-pass: a gradient will flow into this value */
  uint8_t grad_lent;   /* sides (TGI_ON_*) whose grad buffer is another value's (tgi_grad_pass) */
  bool grad_zeroed;    /* parameters: grad.d holds zeros from this sweep's tgi_grad_zero_params */
  uint32_t sweep_uses; /* backward's pre-pass: nodes of the sweep that may add into this gradient */
  uint32_t hook_left;  /* parameters, while a gradient-ready hook is set: those nodes not swept yet */
  tgi_buf data;
  tgi_buf grad;
  /* optimizer state (parameters only), same dtype and size as the value */
  tgi_buf opt_m, opt_v;
  int64_t opt_step;
  char *name; /* parameters: malloc'd name from tg_tape_set_name, or NULL (default name) */
  /* leaf views (TGI_LEAF_VIEW): the leaf whose storage the value shares (slot and generation) and
   * the leaf's version when the view was taken */
  uint32_t base_slot;
  uint64_t base_gen, base_ver;
} tgi_value;

/* Internal bit of tgi_value.flags (above the public TG_* flags): `data` is the caller's buffer
 * (tg_tape_input_borrowed) on the side in data.valid; never written, never freed. */
#define TGI_BORROWED 0x80000000u
/* Internal bit of tgi_value.flags: an op result whose storage is a leaf's (tg_reshape of an input or
 * a parameter, or a reshape of such a result): its bytes are the leaf's until the leaf is rewritten
 * (a version bump), after which reading it is an error (tgi_view_stale). */
#define TGI_LEAF_VIEW 0x40000000u
/* Internal bit of tgi_value.flags: an op result whose storage now holds its gradient
 * (tgi_grad_d_over); reading its data is an error until its op computes it again or the tape is
 * reset. */
#define TGI_SPENT 0x20000000u
/* Frees what a value owns besides memory (its name); value_release calls it. */
void tgi_value_free_name(tgi_value *v);
/* A parameter's name: its given name, or "param.<k>" written into buf (TGI_NAME_BUF bytes) for
 * the parameter at position k of tg_tape_parameters order. */
#define TGI_NAME_BUF 32
const char *tgi_param_name(const tgi_value *v, size_t k, char *buf);
/* Whether a name is one tg_tape_set_name accepts; NULL, or why not (static text). */
const char *tgi_name_invalid(const char *name, size_t len);
/* Host storage of b (a buffer of v), allocated when missing, without copying or changing which
 * side is valid: for callers that check everything before overwriting (tg_tape_load). NULL +
 * sticky error when out of memory. */
void *tgi_alloc_h(tg_tape *t, tgi_value *v, tgi_buf *b);
/* Tape references (tg_tape_destroy drops the caller's; exported DLPack tensors hold one each).
 * The last release frees the tape. */
void tgi_tape_retain(tg_tape *t);
void tgi_tape_release(tg_tape *t);
/* A fresh value slot (kind TGI_FREE, producer -1); NULL when out of host memory. */
tgi_value *tgi_slot_new(tg_tape *t);

/* ------------------------------------------------------------ nodes and capsules */
typedef struct tgi_node tgi_node;

/* {op, provider} -> backward; one static record per lowering (TorchLean's KernelCapsule).
 * The node remembers its capsule, so backward always runs the lowering that ran forward. */
typedef struct tgi_capsule {
  const char *op;
  tg_provider provider;
  tg_status (*backward)(tg_tape *t, tgi_node *n);
  /* optional: extra text for explain (e.g. "causal", "pruned 31%") */
  void (*describe)(const tgi_node *n, char *buf, size_t cap);
} tgi_capsule;

/* The most outputs a node has (the edge attention's products node: U, V and x's renumbered rows). */
#define TGI_MAX_OUT 3
struct tgi_node {
  const tgi_capsule *cap;
  /* An object the node keeps alive (e.g. a relation), released by drop() when the node is
   * dropped (tg_tape_reset, tg_tape_destroy): the tape calls it without knowing what it is. */
  void *held;
  void (*drop)(void *held);
  uint32_t n_in, n_out;
  uint32_t *in;     /* value slots (arena) */
  uint64_t *in_ver; /* versions of the inputs when the node was recorded (arena): backward refuses
                       to run the node when one of them has been rewritten since */
  /* output value slots, n_out <= TGI_MAX_OUT */
  uint32_t out[TGI_MAX_OUT];
  void *saved; /* extra state for backward (arena; host or device per `saved_on`) */
  size_t saved_bytes;
  uint8_t saved_on;
  uint32_t h2d, d2h; /* transfers this node caused (explain) */
  union {
    double f[8];
    int64_t i[8];
  } p;       /* op parameters */
  void *aux; /* op-specific (arena), e.g. split sizes, relation handle */
};

/* ------------------------------------------------------------ tape */
typedef struct tgi_slab tgi_slab;

/* A device buffer anomaly mode will check (tape/finite.c): n elements of dtype at p; when one is
 * NaN or inf, dev_flags[flag] = max(dev_flags[flag], tag). slot: the value (UINT32_MAX: none). */
typedef struct tgi_nf_entry {
  const void *p;
  int64_t n;
  uint32_t slot;
  int32_t tag;
  uint8_t dtype, flag;
} tgi_nf_entry;
#define TGI_NF_PENDING 160u
/* Gradient checks launched on the check stream that the main stream has not waited for yet. */
#define TGI_NF_FLY 512u

struct tg_tape {
  int64_t refs;   /* atomic: the caller's reference + one per exported DLPack tensor */
  tg_runtime *rt; /* referenced */

  /* values: slabs of fixed size so tgi_value pointers stay valid while the tape grows */
  tgi_value **vslabs;
  uint32_t nvslabs;
  uint32_t nvals; /* slots ever used */
  uint32_t tag;   /* tape tag (TGI_TAG_BITS), kept in the high bits of every generation */
  uint32_t *free_slots;
  uint32_t nfree, capfree;

  tgi_node *nodes; /* only indices are stable; re-fetch after recording */
  uint32_t nnodes, capnodes;

  tgi_arena host_arena;
  tgi_arena dev_arena;
  /* Device gradients of step values (not parameters) come from their own arena, so that one memset
   * at the start of a sweep zeroes the room later gradients take: [grad_zero_lo, grad_zero_hi) is
   * known to be zero and untouched since (blocks handed out from it need no zero-fill). */
  tgi_arena grad_arena;
  uintptr_t grad_zero_lo, grad_zero_hi;
  /* The optimizers' and the loss scaler's found-inf flag (one device int, tgi_found_flag): its own
   * allocation, not dev_flags[2], so that a tape outside anomaly mode has no dev_flags and its
   * tg_tape_reset zero-fills nothing. found_flag_zero: known to be 0 (the last optimizer check read
   * it back as 0 and nothing wrote it since), so the next check needs no memset first. */
  int32_t *found_flag;
  bool found_flag_zero;

  tg_status status;      /* sticky */
  char msg[TGI_MSG_CAP]; /* sticky message, or last returned error */
  const char *cur_op;    /* name of the op being called (message prefix) */

  bool grad_enabled;
  bool check_finite;   /* anomaly mode (tape/finite.c) */
  uint32_t nf_checked; /* nodes [0, nf_checked) had their outputs checked (or predate the mode) */
  bool nf_fwd_dev;     /* device checks of outputs issued since the last look at dev_flags[0] */
  bool nf_bwd_dev;     /* device checks of gradients issued in this sweep */
  int32_t *dev_flags;  /* device ints, allocated at first need: [0] forward anomaly (INT32_MAX - node),
                          [1] backward anomaly (node + 1); each a max ([2], [3] unused) */
  /* device checks queued and not launched yet (tape/finite.c), and their bytes */
  tgi_nf_entry nf_pend[TGI_NF_PENDING];
  uint32_t nf_npend;
  uint64_t nf_pend_bytes;
  /* checks launched on the runtime's check stream since the main stream last waited for it
   * (tgi_finite_join), and, of those, the gradient checks (backward hazards; nf_nfly > TGI_NF_FLY:
   * too many to list, any gradient may be one) */
  bool nf_side_busy;
  uint32_t nf_nfly;
  tgi_nf_entry nf_fly[TGI_NF_FLY];
  tg_provider provider;
  uint64_t seed;
  uint64_t rng_calls;
  uint32_t pending_h2d, pending_d2h; /* transfers since the last recorded node */
  tg_grad_ready_fn grad_hook;        /* tg_tape_set_grad_ready_hook (NULL: none) and its user pointer */
  void *grad_hook_user;
};

#define TGI_SLAB 1024u
static inline tgi_value *tgi_slot(const tg_tape *t, uint32_t idx) { return &t->vslabs[idx / TGI_SLAB][idx % TGI_SLAB]; }
/* Ids. A tg_id is (gen << TGI_SLOT_BITS) | slot with gen = (tape tag << TGI_GEN_BITS) | the slot's
 * generation; bit 63 stays clear (ids are >= 0; TG_NO_ID and TG_ABSENT are negative).
 *   slot: at most TGI_MAX_SLOTS values live in one tape (creating one more is TG_ERR_OUT_OF_MEMORY);
 *   generation: bumped when the slot's value is dropped; a slot whose generation is exhausted is
 *     retired (never reused), so a stale id can never match a later value;
 *   tag: unique among the tapes alive (tape.c keeps the set); handed out round-robin, so a dead tape's
 *     tag returns only after 2^TGI_TAG_BITS - 2 later tapes. */
#define TGI_SLOT_BITS 26u
#define TGI_GEN_BITS 18u
#define TGI_TAG_BITS 19u
#define TGI_MAX_SLOTS ((1u << TGI_SLOT_BITS) - 1u)
#define TGI_GEN_MASK ((UINT64_C(1) << TGI_GEN_BITS) - 1u)
static inline bool tgi_gen_exhausted(uint64_t gen) { return (gen & TGI_GEN_MASK) == TGI_GEN_MASK; }
static inline tg_id tgi_make_id(uint32_t idx, uint64_t gen) { return (tg_id)((gen << TGI_SLOT_BITS) | idx); }
static inline uint32_t tgi_id_slot(tg_id id) { return (uint32_t)((uint64_t)id & ((1u << TGI_SLOT_BITS) - 1u)); }
static inline uint64_t tgi_id_gen(tg_id id) { return (uint64_t)id >> TGI_SLOT_BITS; }
static inline uint32_t tgi_gen_tag(uint64_t gen) { return (uint32_t)(gen >> TGI_GEN_BITS); }
/* Resolves an id of tape t: the value, or NULL with *why set ("TG_NO_ID", "foreign", "never issued",
 * "stale"). Shared by tgi_lookup (returning calls) and tgi_arg (op calls). */
tgi_value *tgi_resolve(const tg_tape *t, tg_id id, const char **why);

/* Versions (tiga.h: tg_tape_backward). Every write of a value's data after its creation (tg_tape_write,
 * tg_tape_load, optimizer steps, tgi_write_h/_d) bumps its version; a node records its inputs'
 * versions, and backward refuses to run a node whose input changed since. A writer that changes
 * value bytes without tgi_write_h/_d (e.g. the checkpoint loader, an optimizer updating in place)
 * calls this. */
static inline void tgi_value_bump_version(tgi_value *v) { v->version++; }
/* A leaf view (TGI_LEAF_VIEW) whose leaf was rewritten (or released) since the view was taken: the
 * leaf (the view's bytes are no longer the ones it was taken with), else NULL. */
const tgi_value *tgi_view_stale(const tg_tape *t, const tgi_value *v);
/* Whether v's data may not be read: v is spent (TGI_SPENT) or a leaf view whose leaf was rewritten
 * (tgi_view_stale); then true with the reason written into buf (tgi_read_h / _d, tg_tape_read). */
bool tgi_data_unreadable(const tg_tape *t, const tgi_value *v, char *buf, size_t cap);

/* ------------------------------------------------------------ anomaly mode (tape/finite.c) */

/* Index of the first NaN / inf among n elements of dtype dt on the host, or -1 (integer dtypes: -1). */
int64_t tgi_host_first_nonfinite(tg_dtype dt, const void *p, int64_t n);
/* The device flags of the tape (zeroed at first use); NULL + returned error on failure. */
int32_t *tgi_dev_flags(tg_tape *t, tg_status *st, char *msg);
/* The found-inf flag (allocated at first use, contents unknown until zero-filled: see
 * found_flag_zero); NULL + returned error on failure. */
int32_t *tgi_found_flag(tg_tape *t, tg_status *st, char *msg);
/* Forward: checks the outputs of the nodes recorded since the last check (host at once, device by
 * a flag). Called when an op call ends (tgi_done), so each node is complete (its describe works). */
void tgi_finite_forward(tg_tape *t);
/* Makes device findings of the forward sticky (reads the flag once: a wait for the device). */
void tgi_finite_resolve(tg_tape *t);
/* Backward's start: the checks of the nodes not checked yet are queued, and the forward's device
 * flag is left to be read with the sweep's (tgi_finite_sweep_end): one wait a step, not two. */
void tgi_finite_defer(tg_tape *t);
/* Backward: at the start of a sweep; after node `node`'s backward ran (false: a non-finite gradient
 * was found, the sticky error is set); at the end of the sweep (reads the device flag once). */
tg_status tgi_finite_sweep_begin(tg_tape *t);
bool tgi_finite_backward(tg_tape *t, uint32_t node);
/* Arms the in-kernel checks (cuda/finite.cuh) of flag k with tag for the node about to run (device
 * runtimes in anomaly mode; otherwise nothing); disarm ends them on this thread. */
void tgi_finite_arm(tg_tape *t, int k, int32_t tag);
void tgi_finite_disarm(void);
void tgi_finite_sweep_end(tg_tape *t);
/* tg_tape_reset: forgets the findings of the step. */
void tgi_finite_reset(tg_tape *t);
/* The main stream waits (on the device) for the checks running beside it: call before memory they
 * may still read is freed or reused (tg_tape_reset, tape release). Failures become sticky. */
void tgi_finite_join(tg_tape *t);
/* One explain line of node i (no newline) into buf. */
void tgi_explain_node(const tg_tape *t, uint32_t i, char *buf, size_t cap);

/* ------------------------------------------------------------ threads (debug builds)
 * tiga.h: a runtime and its tapes are used by one thread at a time. Debug builds (NDEBUG unset, or
 * TIGA_DEBUG defined) check it: a call takes the runtime's owner slot (an atomic compare-and-swap
 * of its thread's id) and gives it back when it returns; a call that finds another thread's id
 * there fails (TG_ERR_STATE for returning calls, TG_NO_ID for op calls) with a message in
 * tg_last_error() and on stderr, touching nothing. Op calls take the slot in tgi_op_begin and give
 * it back in tgi_done / tgi_fail; returning calls hold it for their scope (TGI_GUARD). */
#if !defined(NDEBUG) || defined(TIGA_DEBUG)
#define TGI_THREAD_CHECK 1
#else
#define TGI_THREAD_CHECK 0
#endif
typedef struct tgi_guard {
  tg_runtime *rt;
  bool acquired;
} tgi_guard;
/* False when another thread is inside a call on rt (message set). */
bool tgi_thread_enter(tg_runtime *rt, const char *fn, bool *acquired);
void tgi_thread_leave(tg_runtime *rt);
void tgi_guard_exit(tgi_guard *g);
#if TGI_THREAD_CHECK
#define TGI_GUARD(rt_, fn_, fail_ret)                                                                                  \
  tgi_guard tgi_guard_ __attribute__((cleanup(tgi_guard_exit))) = {(rt_), false};                                      \
  if (!tgi_thread_enter(tgi_guard_.rt, (fn_), &tgi_guard_.acquired)) return (fail_ret)
#else
#define TGI_GUARD(rt_, fn_, fail_ret) ((void)0)
#endif

/* ------------------------------------------------------------ helpers for API calls */

/* Records a returned (non-sticky) error on the tape; returns s. */
tg_status tgi_error(tg_tape *t, tg_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Looks an id up for a returning call; NULL with the message set on failure. */
tgi_value *tgi_lookup(tg_tape *t, const char *fn, const char *arg, tg_id id, tg_status *st);
/* A leaf value (input or parameter) from caller data (data_bytes checked); tg_tape_input's body. */
tg_status tgi_new_leaf(tg_tape *t, const char *fn, tgi_kind kind, tg_dtype dt, int ndim, const int64_t *shape,
                       const void *data, size_t data_bytes, unsigned flags, tg_id *out);
/* Checks ndim / shape of a returning call and gives numel (error on the tape). */
tg_status tgi_check_shape(tg_tape *t, const char *fn, int ndim, const int64_t *shape, int64_t *numel);
/* Slot index of a value pointer. */
uint32_t tgi_slot_of(const tg_tape *t, const tgi_value *v);
tg_id tgi_id_of(const tg_tape *t, const tgi_value *v);

/* ------------------------------------------------------------ helpers for op calls
 * Usage in an op:
 *   if (!tgi_op_begin(t, "tg_relu")) return TG_NO_ID;
 *   tgi_value *x = tgi_arg(t, "x", x_id); if (!x) return TG_NO_ID;
 *   ...checks with tgi_fail...
 *   tg_provider p = tgi_pick(t, TGI_HOST_ONLY); if (!p) return TG_NO_ID;
 *   tgi_value *y = tgi_result(t, dtype, ndim, shape); if (!y) return TG_NO_ID;
 *   ...run the kernel on tgi_read_h(t, x) -> tgi_write_h(t, y)...
 *   tgi_node *n = tgi_record(t, &CAP, 1, &x, 1, &y);   (NULL when no grad is needed)
 *   return tgi_done(t, y);
 */
bool tgi_op_begin(tg_tape *t, const char *op);
/* Sets the sticky error (first one wins), prefixed with the current op's name; returns false. */
bool tgi_fail(tg_tape *t, tg_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Resolves an op argument; NULL (sticky error) when unknown or stale. */
tgi_value *tgi_arg(tg_tape *t, const char *arg, tg_id id);
/* An optional argument: NULL without error for TG_ABSENT (*ok stays true); otherwise as
 * tgi_arg (TG_NO_ID is an error that names TG_ABSENT). *ok false on failure. */
tgi_value *tgi_arg_opt(tg_tape *t, const char *arg, tg_id id, bool *ok);
/* Argument must be F32 or F64 (the host float types); false + sticky error otherwise. */
bool tgi_need_float(tg_tape *t, const char *arg, const tgi_value *v);
/* Argument must be a float dtype the provider computes in: HOST f32/f64, CUDA f32/f16/bf16. */
bool tgi_need_float_for(tg_tape *t, tg_provider p, const char *arg, const tgi_value *v);
/* Two float arguments must share a dtype. */
bool tgi_need_same_dtype(tg_tape *t, const char *a, const tgi_value *va, const char *b, const tgi_value *vb);
/* "[2, 3, 4]" into buf; returns buf. */
const char *tgi_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);
#define TGI_SHAPE_STR_CAP 128

/* Provider masks (bit per tg_provider). */
#define TGI_P(p) (1u << (unsigned)(p))
#define TGI_HOST_ONLY TGI_P(TG_PROVIDER_HOST)
#define TGI_HOST_CUDA (TGI_P(TG_PROVIDER_HOST) | TGI_P(TG_PROVIDER_CUDA_FUSED) | TGI_P(TG_PROVIDER_CUDA_COMPOSED))
/* Resolves the tape's current provider against what the op implements. Returns 0
 * (TG_PROVIDER_AUTO) with a sticky error when it cannot be honoured. */
tg_provider tgi_pick(tg_tape *t, unsigned supported);

/* New op result (no bytes yet). NULL + sticky error on failure. */
tgi_value *tgi_result(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape);

/* Data access. *_h: host pointer, *_d: device pointer. read: the current bytes (copied from
 * the other side when needed, counted as a transfer); write: storage to overwrite (the other
 * side becomes stale). NULL + sticky error on failure. */
void *tgi_read_h(tg_tape *t, tgi_value *v);
void *tgi_write_h(tg_tape *t, tgi_value *v);
void *tgi_read_d(tg_tape *t, tgi_value *v);
void *tgi_write_d(tg_tape *t, tgi_value *v);

/* Gradient access for backward. grad_*: the accumulation buffer of v, created zero-filled on
 * first use (host or device side); read: the current gradient, or a zero-filled buffer if
 * none arrived. NULL + error on failure (backward reports tape->msg). */
void *tgi_grad_h(tg_tape *t, tgi_value *v);
void *tgi_grad_d(tg_tape *t, tgi_value *v);
/* Like tgi_grad_*, but a gradient buffer that does not exist yet is NOT zero-filled: *fresh is
 * set to true and the caller must overwrite every element (e.g. a GEMM with beta = 0) instead of
 * accumulating. With *fresh false the caller accumulates as usual. Saves a memset and a read. */
void *tgi_grad_h_fresh(tg_tape *t, tgi_value *v, bool *fresh);
void *tgi_grad_d_fresh(tg_tape *t, tgi_value *v, bool *fresh);

/* For a backward that only adds into v's device gradient (never overwrites it): the gradient
 * buffer of the value whose storage v is a view of, when v is the output of a chain of views
 * (one-input, one-output nodes whose output shares the input's device storage with the same dtype
 * and bytes: tg_reshape) and each input on the way requires grad; else v's own (tgi_grad_d). Adding
 * there is what the views' backwards would do with v's gradient, so v needs no buffer of its own:
 * a reshape of a parameter passed to an op costs no gradient memory. NULL + error on failure. */
void *tgi_grad_d_base(tg_tape *t, tgi_value *v);
/* Gradient over the value's own storage, for a backward that is the last reader of v's data and
 * writes v's whole gradient (no accumulation): v an op result with its own storage (not a view of
 * a leaf, not borrowed), no gradient yet in this sweep, this node the only one that adds into it
 * (sweep_uses == 1), anomaly mode off. tgi_grad_over_ok says whether those hold; tgi_grad_d_over
 * then makes v's device gradient v's device data (lent, forgotten when the next sweep starts) and
 * marks v spent (TGI_SPENT): a later read of v is TG_ERR_STATE until the node computes v again and
 * clears the flag (its next sweep: ops/edge_attention.c, tgi_matmul_redo). Saves v's size in
 * gradient memory. Returns the buffer (v's data). */
bool tgi_grad_over_ok(const tg_tape *t, const tgi_value *v);
void *tgi_grad_d_over(tg_tape *t, tgi_value *v);
/* Gradient hand-off, for a backward whose VJP gives input x exactly y's gradient gy (add's operand
 * of the result's shape, a view): instead of a zero-filled buffer plus gx += gy, x's gradient on
 * `side` (TGI_ON_HOST or TGI_ON_DEV) becomes y's gradient buffer. Done (true) only when x is an op
 * result (a leaf's gradient persists and accumulates across steps) with no gradient yet in this
 * sweep, this node is the only node of the sweep that adds into x's gradient (sweep_uses == 1), and
 * gy is current on that side; then nothing writes either buffer again in the sweep, so both
 * gradients read as they would with a copy. On true the caller must not add gy into x's gradient.
 * The lent buffer is given back (the pointer forgotten) when the next sweep starts. The sweep itself
 * hands off through a view: a node whose one output shares its one input's storage (tg_reshape of
 * an op result) is taken to be the identity, so an op that shares storage must have that VJP. */
bool tgi_grad_pass(tg_tape *t, tgi_value *x, tgi_value *y, int side);
/* Start of a sweep: zeroes the unused room of the device gradient arena with one memset when it is
 * at most 16 MiB, so the gradients the sweep creates there need no zero-fill each (a steady
 * training loop's whole sweep fits: the arena keeps the last step's size). TG_OK, or the memset's
 * failure (sticky). */
tg_status tgi_grad_zero_room(tg_tape *t);
/* Start of a sweep, after the pre-pass marks: the device gradients of parameters that the sweep
 * may write, that tg_tape_zero_grad invalidated (so their first use would zero-fill them with a
 * memset each) and that are small (<= 1 MiB), zeroed by one multi-tensor launch per dtype and
 * flagged (grad_zeroed) so that the first use takes them as they are. tgi_grad_zeroed_clear drops
 * the flags at the end of the sweep. TG_OK, or the launch's failure (sticky). */
tg_status tgi_grad_zero_params(tg_tape *t);
void tgi_grad_zeroed_clear(tg_tape *t);

/* Optimizer state of a parameter: which 0 = first moment / momentum (opt_m), 1 = second moment
 * (opt_v); same dtype and size as the value; zero-filled at first use; persistent. Returns the
 * buffer on the requested side (moved there if it lived on the other). NULL + sticky error. */
void *tgi_state_h(tg_tape *t, tgi_value *v, int which);
void *tgi_state_d(tg_tape *t, tgi_value *v, int which);

/* Scratch memory valid until reset (host or device arena). NULL + sticky error on failure. */
void *tgi_scratch_h(tg_tape *t, size_t bytes);
void *tgi_scratch_d(tg_tape *t, size_t bytes);

/* Capsule tables, one convention for every op: a table holds one capsule per lowering in the order
 * {HOST, CUDA} (an op with one CUDA kernel) or {HOST, CUDA_FUSED, CUDA_COMPOSED}, and the capsule
 * of provider p (as tgi_pick resolved it) is TGI_CAP(table, p). CUDA_COMPOSED picks the composed
 * capsule when the table has one, else the op's CUDA capsule. */
static inline size_t tgi_lowering(tg_provider p, size_t n_caps) {
  return p == TG_PROVIDER_HOST ? 0 : (p == TG_PROVIDER_CUDA_COMPOSED && n_caps > 2) ? 2 : 1;
}
#define TGI_CAP(table, p) (&(table)[tgi_lowering((p), sizeof(table) / sizeof((table)[0]))])

/* Drops what nodes [from, nnodes) hold (their drop callbacks) — reset and destroy. */
void tgi_nodes_drop(tg_tape *t, uint32_t from);

/* Records a node when grad is enabled (every op is recorded so explain shows the whole step);
 * marks the outputs as requiring grad when some input does. Returns NULL in no-grad mode or on
 * failure (check t->status). The pointer is valid until the next tgi_record. Save state for
 * backward only when tgi_needs_grad() says a gradient can flow. */
tgi_node *tgi_record(tg_tape *t, const tgi_capsule *cap, uint32_t n_in, tgi_value *const *in, uint32_t n_out,
                     tgi_value *const *out);
/* Whether a node would be recorded for these inputs (so forward can skip saving state). */
bool tgi_needs_grad(const tg_tape *t, uint32_t n_in, tgi_value *const *in);
/* Finishes an op: the id of v, or TG_NO_ID if the tape holds a sticky error. */
tg_id tgi_done(tg_tape *t, tgi_value *v);

/* In backward: input i of node n, and whether it wants a gradient. */
static inline tgi_value *tgi_in(const tg_tape *t, const tgi_node *n, uint32_t i) { return tgi_slot(t, n->in[i]); }
static inline tgi_value *tgi_out(const tg_tape *t, const tgi_node *n, uint32_t i) { return tgi_slot(t, n->out[i]); }

/* Device of the tape's runtime (NULL if host-only) and its stream / cuBLAS handle. */
static inline tgi_device *tgi_dev(const tg_tape *t) { return t->rt->dev; }
#define TGI_STREAM(t) tgi_device_stream(tgi_dev(t))
#define TGI_CUBLAS(t) tgi_device_cublas(tgi_dev(t))
/* Providers an op offers: HOST, plus CUDA when the library was built with it. */
#ifdef TIGA_HAVE_CUDA
#define TGI_HOST_AND_CUDA TGI_HOST_CUDA
#else
#define TGI_HOST_AND_CUDA TGI_HOST_ONLY
#endif
static inline bool tgi_is_cuda(tg_provider p) { return p == TG_PROVIDER_CUDA_FUSED || p == TG_PROVIDER_CUDA_COMPOSED; }
/* Reports a failed CUDA launcher (message from cuda/launch.h's tgc_error()) as a sticky error. */
bool tgi_fail_cuda(tg_tape *t, tg_status s, const char *what);

/* Runtime of a tape has a device? */
static inline bool tgi_has_device(const tg_tape *t) { return t->rt->dev != NULL; }

#endif

/* train/comm.h — tg_comm's state, shared by train/comm.c (public calls, argument checks, id files,
 * bucket plan, gradient-ready hook) and train/comm_nccl.c (every NCCL call). Not installed. */
#ifndef TIGA_TRAIN_COMM_H
#define TIGA_TRAIN_COMM_H

#include "../tape/internal.h"

struct tgi_nccl; /* comm_nccl.c: the NCCL communicator and the communication stream */

/* The gradient buckets over the parameters of one tape. Plan order is tg_tape_parameters order
 * reversed; bucket b holds plan entries [first[b], first[b + 1]). */
typedef struct tgi_comm_plan {
  uint32_t n;         /* parameters */
  uint32_t *slot;     /* [n] value slot of each */
  uint32_t nbuckets;  /* buckets */
  uint32_t *first;    /* [nbuckets + 1] */
  uint32_t nslots;    /* slots of the tape when planned (size of param_of) */
  uint32_t *param_of; /* [nslots] plan index of a slot, UINT32_MAX when none */
  /* this step's progress */
  uint8_t *ready;    /* [n] 0 not yet, 1 final on the device, 2 final elsewhere (launched at finish) */
  uint32_t *pending; /* [nbuckets] parameters of the bucket not ready yet */
  uint32_t next;     /* first bucket not launched */
} tgi_comm_plan;

struct tg_comm {
  tg_runtime *rt; /* referenced */
  int nranks, rank, device;
  tg_comm_options opts;
  bool dead; /* failed or aborted: every later call is refused */
  struct tgi_nccl *nc;
  tg_tape *tape; /* attached (referenced), or NULL */
  tgi_comm_plan plan;
  tg_status hook_status; /* a failure inside the gradient-ready hook, reported by finish */
  char msg[TGI_MSG_CAP];
};

/* Records a failure on the comm (and in tg_last_error); returns s. */
tg_status tgi_comm_fail(tg_comm *c, tg_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* comm_nccl.c (without NCCL, comm.c's stubs return TG_ERR_UNSUPPORTED). Messages go to c->msg
 * through tgi_comm_fail; tgi_nccl_id_create writes into msg (TGI_MSG_CAP bytes). */
tg_status tgi_nccl_id_create(unsigned char *bytes, size_t nbytes, char *msg);
/* Creates the communicator (c->rt, nranks, rank, opts set) and its stream; waits for every rank. */
tg_status tgi_nccl_open(tg_comm *c, const unsigned char *id, size_t id_bytes);
/* Waits (up to the deadline) for work in flight, then frees; aborts when it does not finish. */
void tgi_nccl_close(tg_comm *c);
/* Compares the parameter layout signature across the ranks, then broadcasts every parameter from
 * rank 0 (ptrs: n device pointers of bytes[i] bytes each). */
tg_status tgi_nccl_broadcast(tg_comm *c, tg_tape *t, uint64_t signature, void *const *ptrs, const size_t *bytes,
                             uint32_t n);
/* Launches one bucket's averaging all-reduce on the comm stream after the tape's stream's work so
 * far: n gradients (device pointers, element counts, dtypes). */
tg_status tgi_nccl_allreduce(tg_comm *c, tg_tape *t, void *const *ptrs, const int64_t *numel, const tg_dtype *dtypes,
                             uint32_t n);
/* The tape's stream waits for everything launched so far; the host too when opts.host_wait. */
tg_status tgi_nccl_join(tg_comm *c, tg_tape *t);

#endif

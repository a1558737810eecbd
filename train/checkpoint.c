/* Checkpoints: every parameter's value and optimizer state in one file.
 *
 * Format (version 1). Integers are little-endian; element bytes are the values as stored in
 * memory (little-endian IEEE; big-endian hosts are refused).
 *
 *   magic        8 bytes  "TIGACKPT"
 *   version      u32      1
 *   reserved     u32      0
 *   count        u64      number of parameters, in tg_tape_parameters order
 *   per parameter:
 *     dtype      u32      tg_dtype
 *     ndim       u32      0..TG_MAX_DIMS
 *     shape      i64[ndim]
 *     opt_step   i64      optimizer step count (AdamW bias correction)
 *     value      u64 n, then n bytes          n = numel * dtype size
 *     m          u64 n, then n bytes          n = 0: no first moment / momentum yet
 *     v          u64 n, then n bytes          n = 0: no second moment yet
 *   checksum     u64      FNV-1a 64 of every byte before it
 *
 * Save writes "<path>.tmp" and renames it over path, so an interrupted save never leaves a
 * half-written checkpoint under the real name. Load reads the file twice: pass 1 checks its
 * structure and checksum and compares every parameter with the tape's (count, dtype, shape)
 * without writing anything; only then pass 2 copies values and state into the host copies
 * (which become the only valid side, as tg_tape_write does). */
#include "../tape/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC "TIGACKPT"
#define CKPT_VERSION 1u
#define CKPT_HEADER_BYTES 24
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static bool little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * FNV_PRIME;
  return h;
}

/* ------------------------------------------------------------ save */

typedef struct writer {
  FILE *f;
  uint64_t hash;
  bool failed;
} writer;

static void w_bytes(writer *w, const void *p, size_t n) {
  if (w->failed || n == 0) return;
  w->hash = fnv(w->hash, p, n);
  if (fwrite(p, 1, n, w->f) != n) w->failed = true;
}

static void w_u64(writer *w, uint64_t x) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(x >> (8 * i));
  w_bytes(w, b, 8);
}

static void w_u32(writer *w, uint32_t x) {
  uint8_t b[4];
  for (int i = 0; i < 4; i++)
    b[i] = (uint8_t)(x >> (8 * i));
  w_bytes(w, b, 4);
}

/* Host bytes of a buffer (its host copy, or a device copy brought into tmp); NULL when it
 * holds nothing. *st receives a failure. */
static const void *host_bytes(tg_tape *t, const tgi_value *v, const tgi_buf *b, void *tmp, tg_status *st, char *msg) {
  *st = TG_OK;
  if (b->valid & TGI_ON_HOST) return b->h;
  if (!(b->valid & TGI_ON_DEV)) return NULL;
  *st = tgi_device_d2h(tgi_dev(t), tmp, b->d, v->bytes, msg);
  return *st ? NULL : tmp;
}

static tg_status write_all(tg_tape *t, writer *w, size_t count, void *tmp) {
  char msg[TGI_MSG_CAP];
  tg_status st;
  w_bytes(w, CKPT_MAGIC, 8);
  w_u32(w, CKPT_VERSION);
  w_u32(w, 0);
  w_u64(w, count);
  size_t index = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    index++;
    w_u32(w, v->dtype);
    w_u32(w, v->ndim);
    for (int d = 0; d < v->ndim; d++)
      w_u64(w, (uint64_t)v->shape[d]);
    w_u64(w, (uint64_t)v->opt_step);
    const tgi_buf *bufs[3] = {&v->data, &v->opt_m, &v->opt_v};
    for (int k = 0; k < 3; k++) {
      const void *p = host_bytes(t, v, bufs[k], tmp, &st, msg);
      if (st) return tgi_error(t, st, "tg_tape_save: reading parameter %zu from the device failed: %s", index - 1, msg);
      w_u64(w, p ? v->bytes : 0);
      if (p) w_bytes(w, p, v->bytes);
    }
  }
  w_u64(w, w->hash);
  return TG_OK;
}

tg_status tg_tape_save(tg_tape *t, const char *path) {
  if (!t) {
    tgi_set_last_error("tg_tape_save: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!path || !*path)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_save: argument 'path' is %s; expected a file name",
                     path ? "empty" : "NULL");
  if (!little_endian())
    return tgi_error(t, TG_ERR_UNSUPPORTED, "tg_tape_save: checkpoints are little-endian; this host is not");
  size_t count = 0, biggest = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    count++;
    if (v->bytes > biggest) biggest = v->bytes;
  }
  size_t plen = strlen(path);
  char *tmp_path = malloc(plen + 5);
  void *tmp = malloc(biggest ? biggest : 1);
  if (!tmp_path || !tmp) {
    free(tmp_path);
    free(tmp);
    return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_save: out of host memory");
  }
  memcpy(tmp_path, path, plen);
  memcpy(tmp_path + plen, ".tmp", 5);
  tg_status s = TG_OK;
  writer w = {fopen(tmp_path, "wb"), FNV_OFFSET, false};
  if (!w.f) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: cannot create '%s': %s", tmp_path, strerror(errno));
    goto out;
  }
  s = write_all(t, &w, count, tmp);
  int close_err = fclose(w.f);
  if (!s && (w.failed || close_err))
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: writing '%s' failed: %s", tmp_path, strerror(errno));
  if (!s && rename(tmp_path, path) != 0)
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: cannot rename '%s' to '%s': %s", tmp_path, path, strerror(errno));
  if (s) remove(tmp_path);
out:
  free(tmp_path);
  free(tmp);
  return s;
}

/* ------------------------------------------------------------ load */

typedef struct reader {
  FILE *f;
  uint64_t hash;
  bool failed; /* short read: truncated file */
} reader;

static void r_bytes(reader *r, void *p, size_t n) {
  if (r->failed || n == 0) return;
  if (fread(p, 1, n, r->f) != n) {
    r->failed = true;
    return;
  }
  r->hash = fnv(r->hash, p, n);
}

/* Reads and hashes n bytes, discarding them. */
static void r_skip(reader *r, uint64_t n) {
  uint8_t buf[1 << 14];
  while (n && !r->failed) {
    size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
    r_bytes(r, buf, k);
    n -= k;
  }
}

static uint64_t r_u64(reader *r) {
  uint8_t b[8] = {0};
  r_bytes(r, b, 8);
  uint64_t x = 0;
  for (int i = 0; i < 8; i++)
    x |= (uint64_t)b[i] << (8 * i);
  return x;
}

static uint32_t r_u32(reader *r) {
  uint8_t b[4] = {0};
  r_bytes(r, b, 4);
  uint32_t x = 0;
  for (int i = 0; i < 4; i++)
    x |= (uint32_t)b[i] << (8 * i);
  return x;
}

/* One parameter's record header, as read. */
typedef struct record {
  uint32_t dtype, ndim;
  int64_t shape[TG_MAX_DIMS];
  int64_t opt_step;
  uint64_t bytes; /* value bytes implied by dtype and shape */
} record;

/* Reads a record header; false (with why) when it is malformed. */
static bool read_record(reader *r, record *rec, char *why, size_t cap) {
  rec->dtype = r_u32(r);
  rec->ndim = r_u32(r);
  if (r->failed) return snprintf(why, cap, "the file ends inside a parameter header"), false;
  if (rec->dtype >= TG_DTYPE_COUNT) return snprintf(why, cap, "dtype code %u is not a tg_dtype", rec->dtype), false;
  if (rec->ndim > TG_MAX_DIMS) return snprintf(why, cap, "ndim %u exceeds %d", rec->ndim, TG_MAX_DIMS), false;
  uint64_t numel = 1;
  for (uint32_t d = 0; d < rec->ndim; d++) {
    rec->shape[d] = (int64_t)r_u64(r);
    if (r->failed) return snprintf(why, cap, "the file ends inside a parameter header"), false;
    if (rec->shape[d] <= 0 || (uint64_t)rec->shape[d] > (UINT64_MAX / 16) / numel)
      return snprintf(why, cap, "size %lld at dim %u is invalid", (long long)rec->shape[d], d), false;
    numel *= (uint64_t)rec->shape[d];
  }
  rec->opt_step = (int64_t)r_u64(r);
  if (r->failed) return snprintf(why, cap, "the file ends inside a parameter header"), false;
  if (rec->opt_step < 0) return snprintf(why, cap, "step count %lld is negative", (long long)rec->opt_step), false;
  rec->bytes = numel * tg_dtype_size((tg_dtype)rec->dtype);
  return true;
}

/* Length of a value / state block; false when it is neither the value size nor (state) 0. */
static bool read_len(reader *r, const record *rec, int k, uint64_t *n, char *why, size_t cap) {
  static const char *const names[3] = {"value", "first moment", "second moment"};
  *n = r_u64(r);
  if (r->failed) return snprintf(why, cap, "the file ends before the %s", names[k]), false;
  if (*n == rec->bytes || (k > 0 && *n == 0)) return true;
  snprintf(why, cap, "its %s holds %llu bytes; expected %llu%s", names[k], (unsigned long long)*n,
           (unsigned long long)rec->bytes, k > 0 ? " or 0" : "");
  return false;
}

/* First difference between a record and the tape's parameter; TG_OK when they match. */
static tg_status compare(const record *rec, const tgi_value *v, size_t index, char *why, size_t cap) {
  char a[TGI_SHAPE_STR_CAP], b[TGI_SHAPE_STR_CAP];
  if (rec->dtype != v->dtype) {
    snprintf(why, cap, "parameter %zu has dtype %s in the checkpoint and %s on the tape", index,
             tg_dtype_name((tg_dtype)rec->dtype), tg_dtype_name((tg_dtype)v->dtype));
    return TG_ERR_DTYPE;
  }
  bool same = rec->ndim == v->ndim;
  for (uint32_t d = 0; same && d < rec->ndim; d++)
    same = rec->shape[d] == v->shape[d];
  if (same) return TG_OK;
  snprintf(why, cap, "parameter %zu has shape %s in the checkpoint and %s on the tape", index,
           tgi_shape_str(rec->shape, (int)rec->ndim, a, sizeof a), tgi_shape_str(v->shape, v->ndim, b, sizeof b));
  return TG_ERR_SHAPE;
}

/* The tape's parameters in tg_tape_parameters order (malloc'd). */
static tgi_value **param_list(tg_tape *t, size_t *count) {
  size_t n = 0;
  for (uint32_t i = 0; i < t->nvals; i++)
    n += tgi_slot(t, i)->kind == TGI_PARAM;
  *count = n;
  tgi_value **ps = malloc((n ? n : 1) * sizeof *ps);
  if (!ps) return NULL;
  size_t k = 0;
  for (uint32_t i = 0; i < t->nvals; i++)
    if (tgi_slot(t, i)->kind == TGI_PARAM) ps[k++] = tgi_slot(t, i);
  return ps;
}

/* Pass 1: structure, checksum and agreement with the tape; writes nothing. has_m / has_v[k]
 * receive whether parameter k carries each state. */
static tg_status check_file(tg_tape *t, FILE *f, const char *path, tgi_value **ps, size_t np, bool *has_m,
                            bool *has_v) {
  reader r = {f, FNV_OFFSET, false};
  char why[TGI_MSG_CAP / 2] = "";
  tg_status mismatch = TG_OK;
  char mismatch_msg[TGI_MSG_CAP / 2] = "";
  char magic[8];
  r_bytes(&r, magic, 8);
  uint32_t version = r_u32(&r);
  r_u32(&r);
  uint64_t count = r_u64(&r);
  if (r.failed) {
    snprintf(why, sizeof why, "the file is shorter than the %d-byte header", CKPT_HEADER_BYTES);
    goto corrupt;
  }
  if (memcmp(magic, CKPT_MAGIC, 8) != 0) {
    snprintf(why, sizeof why, "it does not start with \"%s\" (not a tiga checkpoint)", CKPT_MAGIC);
    goto corrupt;
  }
  if (version != CKPT_VERSION) {
    snprintf(why, sizeof why, "format version %u; this build reads version %u", version, CKPT_VERSION);
    goto corrupt;
  }
  if (count != np) {
    mismatch = TG_ERR_SHAPE;
    snprintf(mismatch_msg, sizeof mismatch_msg, "the checkpoint holds %llu parameters; the tape has %zu",
             (unsigned long long)count, np);
  }
  for (uint64_t k = 0; k < count; k++) {
    record rec;
    if (!read_record(&r, &rec, why, sizeof why)) goto corrupt_at;
    if (!mismatch && k < np) mismatch = compare(&rec, ps[k], (size_t)k, mismatch_msg, sizeof mismatch_msg);
    for (int b = 0; b < 3; b++) {
      uint64_t n;
      if (!read_len(&r, &rec, b, &n, why, sizeof why)) goto corrupt_at;
      if (k < np && b == 1) has_m[k] = n != 0;
      if (k < np && b == 2) has_v[k] = n != 0;
      r_skip(&r, n);
      if (r.failed) {
        snprintf(why, sizeof why, "the file ends inside its data");
        goto corrupt_at;
      }
    }
    continue;
  corrupt_at : {
    char tmp[TGI_MSG_CAP / 2];
    snprintf(tmp, sizeof tmp, "parameter %llu: %s", (unsigned long long)k, why);
    memcpy(why, tmp, sizeof why);
    goto corrupt;
  }
  }
  uint64_t expect = r.hash, got = r_u64(&r);
  if (r.failed) {
    snprintf(why, sizeof why, "the file ends before its checksum (truncated)");
    goto corrupt;
  }
  if (got != expect) {
    snprintf(why, sizeof why, "checksum mismatch (stored %016llx, computed %016llx): the file is corrupt",
             (unsigned long long)got, (unsigned long long)expect);
    goto corrupt;
  }
  if (fgetc(f) != EOF) {
    snprintf(why, sizeof why, "unexpected bytes after the checksum");
    goto corrupt;
  }
  if (mismatch) return tgi_error(t, mismatch, "tg_tape_load: '%s' does not fit this tape: %s", path, mismatch_msg);
  return TG_OK;
corrupt:
  if (ferror(f)) snprintf(why, sizeof why, "read error: %s", strerror(errno));
  return tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' is not a valid checkpoint: %s", path, why);
}

/* Pass 2: copies values and state into the host buffers prepared by the caller. */
static tg_status copy_in(tg_tape *t, FILE *f, const char *path, tgi_value **ps, size_t np) {
  reader r = {f, FNV_OFFSET, false};
  r_skip(&r, CKPT_HEADER_BYTES);
  for (size_t k = 0; k < np && !r.failed; k++) {
    tgi_value *v = ps[k];
    record rec;
    char why[64];
    read_record(&r, &rec, why, sizeof why);
    tgi_buf *bufs[3] = {&v->data, &v->opt_m, &v->opt_v};
    for (int b = 0; b < 3; b++) {
      uint64_t n = r_u64(&r);
      if (n == 0 || r.failed) {
        if (b > 0) bufs[b]->valid = 0; /* no state: zero-filled at its next use */
        continue;
      }
      r_bytes(&r, bufs[b]->h, (size_t)n);
      bufs[b]->valid = TGI_ON_HOST;
    }
    v->opt_step = rec.opt_step;
  }
  uint64_t expect = r.hash, got = r_u64(&r);
  if (r.failed || got != expect)
    return tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' changed while it was being loaded; parameters may hold a mix",
                     path);
  return TG_OK;
}

tg_status tg_tape_load(tg_tape *t, const char *path) {
  if (!t) {
    tgi_set_last_error("tg_tape_load: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!path || !*path)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_load: argument 'path' is %s; expected a file name",
                     path ? "empty" : "NULL");
  if (!little_endian())
    return tgi_error(t, TG_ERR_UNSUPPORTED, "tg_tape_load: checkpoints are little-endian; this host is not");
  FILE *f = fopen(path, "rb");
  if (!f) return tgi_error(t, TG_ERR_IO, "tg_tape_load: cannot open '%s': %s", path, strerror(errno));
  size_t np;
  tgi_value **ps = param_list(t, &np);
  bool *flags = calloc(2 * (np ? np : 1), sizeof *flags);
  tg_status s = TG_OK;
  if (!ps || !flags) {
    s = tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_load: out of host memory");
    goto out;
  }
  bool *has_m = flags, *has_v = flags + np;
  s = check_file(t, f, path, ps, np, has_m, has_v);
  if (s) goto out;
  /* host storage for everything pass 2 writes; placement only, no value changes. The helpers
   * report through the sticky status, so a sticky error from before is set aside meanwhile. */
  tg_status sticky = t->status;
  char sticky_msg[TGI_MSG_CAP], fail_msg[TGI_MSG_CAP];
  memcpy(sticky_msg, t->msg, sizeof sticky_msg);
  const char *before = t->cur_op;
  t->cur_op = "tg_tape_load";
  t->status = TG_OK;
  for (size_t k = 0; k < np && !s; k++) {
    if (!tgi_read_h(t, ps[k]) || (has_m[k] && !tgi_state_h(t, ps[k], 0)) || (has_v[k] && !tgi_state_h(t, ps[k], 1))) {
      s = t->status ? t->status : TG_ERR_INTERNAL;
      memcpy(fail_msg, t->msg, sizeof fail_msg);
    }
  }
  t->status = sticky;
  t->cur_op = before;
  if (sticky) memcpy(t->msg, sticky_msg, sizeof sticky_msg);
  if (s) {
    tgi_error(t, s, "%s", fail_msg);
    goto out;
  }
  if (fseek(f, 0, SEEK_SET) != 0) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_load: cannot seek in '%s': %s", path, strerror(errno));
    goto out;
  }
  s = copy_in(t, f, path, ps, np);
out:
  fclose(f);
  free(ps);
  free(flags);
  return s;
}

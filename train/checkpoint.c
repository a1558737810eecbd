/* Checkpoints in the safetensors format (tiga.h documents the layout and the rules).
 *
 * Save: the header is built in memory (offsets follow from the sizes), tensors ordered by element
 * size, largest first, so every tensor starts aligned to its element size (the header is padded
 * with spaces to a multiple of 8, as the safetensors writer does). The checksum's 16 hex digits
 * are written as zeros first and patched in with pwrite once the data is written and hashed, so
 * device data is copied to the host once. The file is "<path>.tmp", fsynced, renamed over path,
 * and the directory fsynced.
 *
 * Load: the whole file is read once into memory (a file that changes meanwhile can only make the
 * read fail, never disagree with what was checked), parsed and checked whole — header, data
 * tiling, checksum, names, dtypes, shapes, step counts — before the first parameter changes. */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fsync, pwrite */
#include "../tape/internal.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
#define MAX_STEP (INT64_C(1) << 53) /* exact in a double; AdamW's t + 1 cannot overflow */
#define FORMAT "1"
/* FNV-1a 64 of the whole file with its own 16 digits read as '0's. */
#define SUM_KEY "tiga.fnv1a64"

static const char *const SUFFIX[3] = {"", ".opt_m", ".opt_v"};

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

/* The tape's parameters in tg_tape_parameters order with their names (malloc'd). */
typedef struct param {
  tgi_value *v;
  const char *name;
  char buf[TGI_NAME_BUF];
} param;

static param *param_list(tg_tape *t, size_t *count) {
  size_t n = 0;
  for (uint32_t i = 0; i < t->nvals; i++)
    n += tgi_slot(t, i)->kind == TGI_PARAM;
  *count = n;
  param *ps = tgi_calloc(n ? n : 1, sizeof *ps);
  if (!ps) return NULL;
  size_t k = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    ps[k].v = v;
    ps[k].name = tgi_param_name(v, k, ps[k].buf);
    k++;
  }
  return ps;
}

/* ------------------------------------------------------------ a growing string */

typedef struct sbuf {
  char *s;
  size_t len, cap;
  bool failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = true;
      return;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t nc = (b->cap ? 2 * b->cap : 4096) + (size_t)n;
    char *ns = tgi_realloc(b->s, nc);
    if (!ns) {
      b->failed = true;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
}

/* ------------------------------------------------------------ save */

typedef struct entry {
  const param *p;
  int which; /* 0 value, 1 first moment, 2 second moment */
  size_t esize, seq;
  uint64_t begin;
} entry;

static const tgi_buf *entry_buf(const entry *e) {
  const tgi_value *v = e->p->v;
  return e->which == 0 ? &v->data : e->which == 1 ? &v->opt_m : &v->opt_v;
}

static int by_size_then_seq(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->esize != y->esize) return x->esize > y->esize ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

/* The header JSON (padded) for the entries; *hash_at receives the offset of the checksum's 16
 * digits in it. NULL when out of memory. */
static char *build_header(const param *ps, size_t np, const entry *es, size_t ne, size_t *len, size_t *hash_at) {
  sbuf b = {0};
  int64_t step = 0;
  for (size_t k = 0; k < np; k++)
    if (ps[k].v->opt_step > step) step = ps[k].v->opt_step;
  sb_printf(&b, "{\"__metadata__\":{\"tiga.format\":\"" FORMAT "\",\"tiga.version\":\"%s\",\"tiga.step\":\"%lld\"",
            tg_version_string(), (long long)step);
  sb_printf(&b, ",\"" SUM_KEY "\":\"");
  *hash_at = b.len;
  sb_printf(&b, "0000000000000000\"");
  for (size_t k = 0; k < np; k++)
    sb_printf(&b, ",\"%s.opt_step\":\"%lld\",\"%s.flags\":\"%s\"", ps[k].name, (long long)ps[k].v->opt_step, ps[k].name,
              (ps[k].v->flags & TG_NO_WEIGHT_DECAY) ? "no_weight_decay" : "");
  sb_printf(&b, "}");
  for (size_t k = 0; k < ne; k++) {
    const tgi_value *v = es[k].p->v;
    sb_printf(&b, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[", es[k].p->name, SUFFIX[es[k].which],
              tgi_st_dtype_name((tg_dtype)v->dtype));
    for (int d = 0; d < v->ndim; d++)
      sb_printf(&b, "%s%lld", d ? "," : "", (long long)v->shape[d]);
    sb_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)es[k].begin,
              (unsigned long long)(es[k].begin + v->bytes));
  }
  sb_printf(&b, "}");
  while (!b.failed && (8 + b.len) % 8)
    sb_printf(&b, " ");
  if (b.failed) {
    free(b.s);
    return NULL;
  }
  *len = b.len;
  return b.s;
}

/* Writes the data section, continuing the hash in *hash; TG_OK or an error on the tape. */
static tg_status write_data(tg_tape *t, int fd, const char *tmp_path, const entry *es, size_t ne, void *stage,
                            uint64_t *hash) {
  uint64_t h = *hash;
  for (size_t k = 0; k < ne; k++) {
    const tgi_value *v = es[k].p->v;
    const tgi_buf *b = entry_buf(&es[k]);
    const void *src = b->h;
    if (!(b->valid & TGI_ON_HOST)) {
      char msg[TGI_MSG_CAP];
      tg_status s = tgi_device_d2h(tgi_dev(t), stage, b->d, v->bytes, msg);
      if (s)
        return tgi_error(t, s, "tg_tape_save: reading '%s%s' from the device failed: %s", es[k].p->name,
                         SUFFIX[es[k].which], msg);
      src = stage;
    }
    h = fnv(h, src, v->bytes);
    if (!write_all(fd, src, v->bytes))
      return tgi_error(t, TG_ERR_IO, "tg_tape_save: writing '%s' failed: %s", tmp_path, strerror(errno));
  }
  *hash = h;
  return TG_OK;
}

/* fsync of the directory that holds path, so the rename survives a crash. */
static tg_status sync_dir(tg_tape *t, const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? tgi_malloc((size_t)(slash - path) + 2) : NULL;
  if (slash && !dir) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_save: out of host memory");
  if (dir) {
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, n);
    dir[n] = 0;
  }
  int fd = open(dir ? dir : ".", O_RDONLY | O_CLOEXEC);
  tg_status s = TG_OK;
  if (fd < 0 || fsync(fd) != 0)
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: cannot sync the directory '%s': %s", dir ? dir : ".", strerror(errno));
  if (fd >= 0) close(fd);
  free(dir);
  return s;
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
  size_t np, ne = 0, biggest = 1, hlen = 0, hash_at = 0, plen = strlen(path);
  param *ps = param_list(t, &np);
  entry *es = tgi_calloc(3 * (np ? np : 1), sizeof *es);
  char *tmp_path = tgi_malloc(plen + 5), *header = NULL;
  void *stage = NULL;
  int fd = -1;
  tg_status s = TG_OK;
  if (!ps || !es || !tmp_path) goto oom;
  for (size_t k = 0; k < np; k++) {
    tgi_value *v = ps[k].v;
    const tgi_buf *bufs[3] = {&v->data, &v->opt_m, &v->opt_v};
    for (int w = 0; w < 3; w++)
      if (w == 0 || bufs[w]->valid) es[ne] = (entry){&ps[k], w, tg_dtype_size((tg_dtype)v->dtype), ne, 0}, ne++;
    if (!(v->data.valid & TGI_ON_HOST) && v->bytes > biggest) biggest = v->bytes;
    if (!(v->opt_m.valid & TGI_ON_HOST) && v->bytes > biggest) biggest = v->bytes;
    if (!(v->opt_v.valid & TGI_ON_HOST) && v->bytes > biggest) biggest = v->bytes;
  }
  qsort(es, ne, sizeof *es, by_size_then_seq);
  uint64_t at = 0;
  for (size_t k = 0; k < ne; k++) {
    es[k].begin = at;
    at += es[k].p->v->bytes;
  }
  header = build_header(ps, np, es, ne, &hlen, &hash_at);
  stage = tgi_malloc(biggest);
  if (!header || !stage) goto oom;
  memcpy(tmp_path, path, plen);
  memcpy(tmp_path + plen, ".tmp", 5);
  fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: cannot create '%s': %s", tmp_path, strerror(errno));
    goto out;
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++)
    len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  if (!write_all(fd, len8, 8) || !write_all(fd, header, hlen)) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: writing '%s' failed: %s", tmp_path, strerror(errno));
    goto out;
  }
  uint64_t hash = fnv(fnv(FNV_OFFSET, len8, 8), header, hlen); /* the digits are still zeros */
  s = write_data(t, fd, tmp_path, es, ne, stage, &hash);
  if (s) goto out;
  char digits[17];
  snprintf(digits, sizeof digits, "%016llx", (unsigned long long)hash);
  if (pwrite(fd, digits, 16, (off_t)(8 + hash_at)) != 16 || fsync(fd) != 0) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: writing '%s' failed: %s", tmp_path, strerror(errno));
    goto out;
  }
  int cfd = fd;
  fd = -1;
  if (close(cfd) != 0) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: closing '%s' failed: %s", tmp_path, strerror(errno));
    goto out;
  }
  if (rename(tmp_path, path) != 0) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_save: cannot rename '%s' to '%s': %s", tmp_path, path, strerror(errno));
    goto out;
  }
  s = sync_dir(t, path);
  goto done;
oom:
  s = tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_save: out of host memory");
  goto done;
out:
  if (fd >= 0) close(fd);
  if (tmp_path) remove(tmp_path);
done:
  free(ps);
  free(es);
  free(tmp_path);
  free(header);
  free(stage);
  return s;
}

/* ------------------------------------------------------------ load */

/* Reads a regular file whole. A FIFO or device is refused before any read (opened
 * non-blocking, so opening a FIFO without a writer does not hang either). */
static tg_status read_file(tg_tape *t, const char *path, uint8_t **out, size_t *size) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return tgi_error(t, TG_ERR_IO, "tg_tape_load: cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  tg_status s = TG_OK;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_load: cannot stat '%s': %s", path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' is not a regular file (a directory, FIFO or device)", path);
    goto out;
  }
  if (st.st_size < 8 || (uint64_t)st.st_size > SIZE_MAX - 1) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' is not a valid checkpoint: %lld bytes is %s", path,
                  (long long)st.st_size, st.st_size < 8 ? "shorter than the 8-byte header length" : "too large");
    goto out;
  }
  size_t n = (size_t)st.st_size, got = 0;
  buf = tgi_malloc(n + 1);
  if (!buf) {
    s = tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_load: out of host memory (%zu bytes for '%s')", n, path);
    goto out;
  }
  while (got <= n) { /* one byte more than the size: a file that grew is noticed */
    ssize_t r = read(fd, buf + got, n + 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      s = tgi_error(t, TG_ERR_IO, "tg_tape_load: reading '%s' failed: %s", path, strerror(errno));
      goto out;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  if (got != n) {
    s = tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' changed while it was read (%zu bytes instead of %zu)", path, got,
                  n);
    goto out;
  }
  *out = buf;
  *size = n;
  buf = NULL;
out:
  free(buf);
  close(fd);
  return s;
}

/* Strict decimal in [0, MAX_STEP]. */
static bool parse_step(const char *s, int64_t *out) {
  int64_t v = 0;
  if (!*s || (s[0] == '0' && s[1])) return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (*s - '0');
    if (v > MAX_STEP) return false;
  }
  *out = v;
  return true;
}

/* What the load will write into parameter k. */
typedef struct plan {
  const tgi_st_tensor *src[3]; /* value, first moment, second moment (NULL: absent) */
  int64_t step;
} plan;

static bool same_shape(const tgi_st_tensor *a, const tgi_value *v) {
  if (a->ndim != v->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != v->shape[d]) return false;
  return true;
}

/* Names of up to three tensors no parameter claimed (for the message). */
static void unclaimed(const tgi_st_header *h, const bool *used, char *dst, size_t cap) {
  size_t n = 0, len = 0;
  dst[0] = 0;
  for (size_t k = 0; k < h->n_tensors && n < 3; k++) {
    if (used[k]) continue;
    int w = snprintf(dst + len, cap - len, "%s'%.60s'", n ? ", " : "", h->tensors[k].name);
    if (w < 0 || (size_t)w >= cap - len) break;
    len += (size_t)w;
    n++;
  }
  if (!n) snprintf(dst, cap, "none");
}

/* Matches the file with the tape; TG_OK or a mismatch / malformed-step error on the tape. */
static tg_status match(tg_tape *t, const char *path, const tgi_st_header *h, const param *ps, size_t np, plan *pl) {
  bool *used = tgi_calloc(h->n_tensors ? h->n_tensors : 1, sizeof *used);
  if (!used) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_load: out of host memory");
  tg_status s = TG_OK;
  char name[TG_NAME_MAX + 16], sa[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP], list[256];
  for (size_t k = 0; k < np && !s; k++) {
    const tgi_value *v = ps[k].v;
    for (int w = 0; w < 3 && !s; w++) {
      snprintf(name, sizeof name, "%s%s", ps[k].name, SUFFIX[w]);
      const tgi_st_tensor *x = tgi_st_find(h, name);
      pl[k].src[w] = x;
      if (!x) {
        if (w == 0) {
          unclaimed(h, used, list, sizeof list);
          s = tgi_error(t, TG_ERR_SHAPE,
                        "tg_tape_load: '%s' does not fit this tape: parameter '%s' (position %zu) is not in the "
                        "checkpoint (tensors no parameter claims: %s)",
                        path, ps[k].name, k, list);
        }
        continue;
      }
      used[x - h->tensors] = true;
      if (x->dtype != v->dtype)
        s = tgi_error(t, TG_ERR_DTYPE,
                      "tg_tape_load: '%s' does not fit this tape: '%s' is %s in the checkpoint and %s on the tape",
                      path, name, x->dtype_name, tg_dtype_name((tg_dtype)v->dtype));
      else if (!same_shape(x, v))
        s = tgi_error(t, TG_ERR_SHAPE,
                      "tg_tape_load: '%s' does not fit this tape: '%s' has shape %s in the checkpoint and %s on the "
                      "tape",
                      path, name, tgi_shape_str(x->shape, x->ndim, sa, sizeof sa),
                      tgi_shape_str(v->shape, v->ndim, sb, sizeof sb));
    }
    if (s) break;
    snprintf(name, sizeof name, "%s.opt_step", ps[k].name);
    const char *step = tgi_st_meta_get(h, name);
    pl[k].step = 0;
    if (step && !parse_step(step, &pl[k].step))
      s = tgi_error(t, TG_ERR_IO,
                    "tg_tape_load: '%s' is not a valid checkpoint: metadata '%s' is \"%.40s\"; expected a step count "
                    "in 0..2^53",
                    path, name, step);
  }
  for (size_t k = 0; k < h->n_tensors && !s; k++)
    if (!used[k])
      s = tgi_error(t, TG_ERR_SHAPE,
                    "tg_tape_load: '%s' does not fit this tape: the checkpoint holds '%s' (%s %s), which is no "
                    "parameter of the tape nor its optimizer state (.opt_m / .opt_v)",
                    path, h->tensors[k].name, h->tensors[k].dtype_name,
                    tgi_shape_str(h->tensors[k].shape, h->tensors[k].ndim, sa, sizeof sa));
  free(used);
  return s;
}

/* Header, checksum and format checks; TG_OK or TG_ERR_IO on the tape. */
static tg_status check_file(tg_tape *t, const char *path, const uint8_t *buf, size_t size, tgi_st_header *h,
                            const uint8_t **data_out) {
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++)
    hl |= (uint64_t)buf[i] << (8 * i);
  char why[TGI_MSG_CAP / 2];
  if (hl > size - 8 || hl > TGI_ST_MAX_HEADER) {
    snprintf(why, sizeof why, "its header length %llu exceeds %s (%llu bytes)", (unsigned long long)hl,
             hl > size - 8 ? "the file" : "the 100 MB limit",
             (unsigned long long)(hl > size - 8 ? size - 8 : TGI_ST_MAX_HEADER));
    return tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' is not a valid checkpoint: %s", path, why);
  }
  const uint8_t *data = buf + 8 + hl;
  uint64_t data_len = size - 8 - hl;
  *data_out = data;
  (void)data_len;
  if (!tgi_st_parse((const char *)buf + 8, (size_t)hl, data_len, h, why, sizeof why))
    return tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' is not a valid checkpoint: %s", path, why);
  const char *fmt = tgi_st_meta_get(h, "tiga.format");
  if (fmt && strcmp(fmt, FORMAT))
    return tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' has tiga.format \"%.20s\"; this build reads \"" FORMAT "\"",
                     path, fmt);
  const char *sum = tgi_st_meta_get(h, SUM_KEY);
  if (sum) {
    /* the digits' place in the raw header: a tiga-written file has the key once, unescaped */
    static const char key[] = "\"" SUM_KEY "\":\"";
    const char *at = NULL, *hdr = (const char *)buf + 8;
    for (size_t i = 0; i + sizeof key - 1 + 16 <= hl && !at; i++)
      if (!memcmp(hdr + i, key, sizeof key - 1)) at = hdr + i + sizeof key - 1;
    if (!at)
      return tgi_error(t, TG_ERR_IO, "tg_tape_load: '%s' is corrupt: its " SUM_KEY " entry is not as tiga writes it",
                       path);
    size_t pos = (size_t)(at - (const char *)buf);
    uint64_t x = fnv(fnv(fnv(FNV_OFFSET, buf, pos), "0000000000000000", 16), buf + pos + 16, size - pos - 16);
    char got[17];
    snprintf(got, sizeof got, "%016llx", (unsigned long long)x);
    if (strcmp(sum, got))
      return tgi_error(t, TG_ERR_IO,
                       "tg_tape_load: '%s' is corrupt: checksum mismatch (" SUM_KEY " \"%.20s\", the file hashes to "
                       "%s)",
                       path, sum, got);
  }
  return TG_OK;
}

/* Host storage for everything the copy writes, allocated before anything changes. */
static tg_status prepare(tg_tape *t, const param *ps, size_t np, const plan *pl) {
  tg_status sticky = t->status, s = TG_OK;
  char sticky_msg[TGI_MSG_CAP], fail_msg[TGI_MSG_CAP];
  memcpy(sticky_msg, t->msg, sizeof sticky_msg);
  const char *before = t->cur_op;
  t->cur_op = "tg_tape_load";
  t->status = TG_OK;
  for (size_t k = 0; k < np && !s; k++) {
    tgi_value *v = ps[k].v;
    tgi_buf *bufs[3] = {&v->data, &v->opt_m, &v->opt_v};
    for (int w = 0; w < 3 && !s; w++)
      if (pl[k].src[w] && !tgi_alloc_h(t, v, bufs[w])) {
        s = t->status ? t->status : TG_ERR_INTERNAL;
        memcpy(fail_msg, t->msg, sizeof fail_msg);
      }
  }
  t->status = sticky;
  t->cur_op = before;
  memcpy(t->msg, sticky_msg, sizeof sticky_msg);
  return s ? tgi_error(t, s, "%s", fail_msg) : TG_OK;
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
  uint8_t *buf;
  size_t size = 0, np = 0;
  tg_status s = read_file(t, path, &buf, &size);
  if (s) return s;
  tgi_st_header h;
  memset(&h, 0, sizeof h);
  param *ps = NULL;
  plan *pl = NULL;
  const uint8_t *data = NULL;
  s = check_file(t, path, buf, size, &h, &data);
  if (s) goto out;
  ps = param_list(t, &np);
  pl = tgi_calloc(np ? np : 1, sizeof *pl);
  if (!ps || !pl) {
    s = tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_load: out of host memory");
    goto out;
  }
  s = match(t, path, &h, ps, np, pl);
  if (!s) s = prepare(t, ps, np, pl);
  if (s) goto out;
  /* Nothing can fail from here on: the tape changes whole or not at all. */
  if (t->rt->dev) { /* parameters' host copies are not upload sources, but wait as tg_tape_write does */
    char msg[TGI_MSG_CAP];
    s = tgi_device_h2d_wait(t->rt->dev, msg);
    if (s) {
      s = tgi_error(t, s, "tg_tape_load: %s", msg);
      goto out;
    }
  }
  for (size_t k = 0; k < np; k++) {
    tgi_value *v = ps[k].v;
    tgi_buf *bufs[3] = {&v->data, &v->opt_m, &v->opt_v};
    for (int w = 0; w < 3; w++) {
      const tgi_st_tensor *x = pl[k].src[w];
      if (!x) {
        if (w) bufs[w]->valid = 0; /* no state: zero-filled at its next use */
        continue;
      }
      memcpy(bufs[w]->h, data + x->begin, v->bytes);
      bufs[w]->valid = TGI_ON_HOST;
    }
    v->opt_step = pl[k].step;
    tgi_value_bump_version(v); /* nodes recorded before the load refuse their backward */
  }
out:
  tgi_st_free(&h);
  free(buf);
  free(ps);
  free(pl);
  return s;
}

/* Parameter names: tg_tape_set_name / tg_tape_name / tg_tape_find_parameter. A checkpoint stores
 * each parameter under its name (train/checkpoint.c), so names are restricted to characters that
 * need no escaping in JSON and must not collide with the keys a checkpoint derives from them. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEED_TAPE(fn)                                                                                                  \
  do {                                                                                                                 \
    if (!t) {                                                                                                          \
      tgi_set_last_error(fn ": argument 'tape' is NULL; expected a tape from tg_tape_create");                         \
      return TG_ERR_INVALID_ARGUMENT;                                                                                  \
    }                                                                                                                  \
  } while (0)

void tgi_value_free_name(tgi_value *v) {
  free(v->name);
  v->name = NULL;
}

const char *tgi_param_name(const tgi_value *v, size_t k, char *buf) {
  if (v->name) return v->name;
  snprintf(buf, TGI_NAME_BUF, "param.%zu", k);
  return buf;
}

static bool ends_with(const char *s, size_t len, const char *suffix) {
  size_t n = strlen(suffix);
  return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

const char *tgi_name_invalid(const char *name, size_t len) {
  if (len == 0) return "it is empty";
  if (len > TG_NAME_MAX) return "it is longer than TG_NAME_MAX (200) bytes";
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x21 || c > 0x7e || c == '"' || c == '\\')
      return "it has a character other than printable ASCII (0x21..0x7e, no '\"' or '\\')";
  }
  if (len == 12 && !memcmp(name, "__metadata__", 12)) return "\"__metadata__\" is reserved (safetensors' metadata key)";
  static const char *const suffixes[] = {".opt_m", ".opt_v", ".opt_step", ".flags"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
    if (ends_with(name, len, suffixes[i])) return "names ending in .opt_m, .opt_v, .opt_step or .flags are reserved";
  if (len > 6 && !memcmp(name, "param.", 6)) {
    size_t i = 6;
    while (i < len && name[i] >= '0' && name[i] <= '9')
      i++;
    if (i == len) return "\"param.<digits>\" is the default name of unnamed parameters";
  }
  return NULL;
}

/* The parameter called `name` (given or default); NULL when none. *pos receives its position. */
static tgi_value *find(const tg_tape *t, const char *name, size_t *pos) {
  size_t k = 0;
  char buf[TGI_NAME_BUF];
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    if (!strcmp(tgi_param_name(v, k, buf), name)) {
      if (pos) *pos = k;
      return v;
    }
    k++;
  }
  return NULL;
}

/* Position of parameter v in tg_tape_parameters order. */
static size_t position(const tg_tape *t, const tgi_value *v) {
  size_t k = 0;
  for (uint32_t i = 0; i < t->nvals && tgi_slot(t, i) != v; i++)
    k += tgi_slot(t, i)->kind == TGI_PARAM;
  return k;
}

static tgi_value *lookup_param(tg_tape *t, const char *fn, tg_id id, tg_status *s) {
  tgi_value *v = tgi_lookup(t, fn, "id", id, s);
  if (v && v->kind != TGI_PARAM) {
    *s = tgi_error(t, TG_ERR_STATE, "%s: value %lld is a step value; only parameters have names", fn, (long long)id);
    return NULL;
  }
  return v;
}

tg_status tg_tape_set_name(tg_tape *t, tg_id id, const char *name) {
  NEED_TAPE("tg_tape_set_name");
  tg_status s;
  tgi_value *v = lookup_param(t, "tg_tape_set_name", id, &s);
  if (!v) return s;
  if (!name) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_set_name: argument 'name' is NULL");
  size_t len = strnlen(name, TG_NAME_MAX + 1);
  const char *why = tgi_name_invalid(name, len);
  if (why)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_set_name: name '%.*s' is refused: %s", (int)len, name, why);
  size_t pos;
  tgi_value *other = find(t, name, &pos);
  if (other == v) return TG_OK;
  if (other)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "tg_tape_set_name: name '%s' is taken by parameter %lld (position %zu); names are unique", name,
                     (long long)tgi_id_of(t, other), pos);
  char *copy = tgi_malloc(len + 1);
  if (!copy) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_set_name: out of host memory");
  memcpy(copy, name, len + 1);
  free(v->name);
  v->name = copy;
  return TG_OK;
}

tg_status tg_tape_name(tg_tape *t, tg_id id, char *buf, size_t cap, size_t *len) {
  NEED_TAPE("tg_tape_name");
  tg_status s;
  tgi_value *v = lookup_param(t, "tg_tape_name", id, &s);
  if (!v) return s;
  if (!buf && cap)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_name: argument 'buf' is NULL but cap is %zu", cap);
  char tmp[TGI_NAME_BUF];
  const char *name = tgi_param_name(v, position(t, v), tmp);
  size_t n = strlen(name);
  if (cap) {
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(buf, name, k);
    buf[k] = 0;
  }
  if (len) *len = n;
  return TG_OK;
}

tg_status tg_tape_find_parameter(tg_tape *t, const char *name, tg_id *out) {
  NEED_TAPE("tg_tape_find_parameter");
  if (out) *out = TG_NO_ID;
  if (!name || !out)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_find_parameter: argument '%s' is NULL",
                     !name ? "name" : "out");
  tgi_value *v = find(t, name, NULL);
  if (!v)
    return tgi_error(t, TG_ERR_INVALID_ID, "tg_tape_find_parameter: the tape has no parameter named '%.*s'",
                     TG_NAME_MAX, name);
  *out = tgi_id_of(t, v);
  return TG_OK;
}

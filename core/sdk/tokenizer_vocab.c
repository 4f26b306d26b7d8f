/* tokenizer_vocab.c — loading a WordPiece vocabulary (vocab.txt or
 * tokenizer.json) into the token hash tables, and the vocabulary API. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfcore/file_read.h"
#include "tfcore/log.h"
#include "tokenizer_internal.h"

/* No real vocabulary has tokens this long; a longer line is a wrong file. */
#define TOK_MAX_TOKEN_BYTES 1024
/* vocab.txt / tokenizer.json larger than this is not a vocabulary. */
#define TOK_MAX_FILE_BYTES ((size_t)1 << 30)

static const char *const special_default[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

uint32_t tok_hash(const char *s, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)len;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        s += 8;
        len -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) v |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(h >> 32);
}

/* ------------------------------------------------------------- building */

/* One (token, id) pair while loading; the token's bytes are in a pool. */
typedef struct vocab_entry {
    size_t off;
    uint32_t len;
    int32_t id;
    long line; /* vocab.txt line (1-based), 0 for tokenizer.json */
} vocab_entry;

typedef struct vocab_build {
    vocab_entry *e;
    size_t n, cap;
    char *pool;
    size_t pool_len, pool_cap;
} vocab_build;

static int build_add(vocab_build *b, const char *s, size_t len, int32_t id, long line)
{
    if (tok_grow((void **)&b->e, &b->cap, b->n + 1, sizeof *b->e)) return -1;
    if (tok_grow((void **)&b->pool, &b->pool_cap, b->pool_len + len + 1, 1)) return -1;
    memcpy(b->pool + b->pool_len, s, len);
    b->pool[b->pool_len + len] = '\0';
    b->e[b->n++] = (vocab_entry){b->pool_len, (uint32_t)len, id, line};
    b->pool_len += len + 1;
    return 0;
}

static void build_free(vocab_build *b)
{
    free(b->e);
    free(b->pool);
}

static int table_init(tok_table *t, size_t count)
{
    size_t cap = 16;
    while (cap < 2 * count) cap *= 2;
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->slots) return -1;
    for (size_t i = 0; i < cap; i++) t->slots[i].id = -1;
    t->mask = (uint32_t)(cap - 1);
    t->count = 0;
    t->max_len = 0;
    return 0;
}

/* Insert or overwrite key -> id; returns the id it replaced, or -1. */
static int32_t table_put(tok_table *t, const char *pool, uint32_t off, uint32_t len, int32_t id)
{
    uint32_t h = tok_hash(pool + off, len);
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        tok_slot *s = &t->slots[i];
        if (s->id < 0) {
            *s = (tok_slot){h, len, off, id};
            t->count++;
            if (len > t->max_len) t->max_len = len;
            return -1;
        }
        if (s->hash == h && s->len == len && memcmp(pool + s->off, pool + off, len) == 0) {
            int32_t old = s->id;
            s->id = id;
            s->off = off;
            return old;
        }
    }
}

/* Trailing Unicode whitespace, as Rust's str::trim_end. */
static size_t trim_end(const char *s, size_t len)
{
    while (len > 0) {
        size_t k = len - 1;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80 && len - k < 4) k--;
        uint32_t cp;
        if (tok_utf8_decode((const unsigned char *)s + k, len - k, &cp) != 1) break;
        if (!(tok_class(cp) & TOKC_SPACE)) break;
        len = k;
    }
    return len;
}

static tf_status read_file(const char *path, char **data, size_t *len, tf_error *err)
{
    FILE *f;
    tf_status ost = tf_file_fopen_read(path, NULL, TF_ERR_DATA, &f, err);
    if (ost != TF_OK) return ost;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return tf_error_set(err, TF_ERR_DATA, "%s: cannot stat: %s", path, strerror(errno));
    }
    if ((uint64_t)st.st_size > TOK_MAX_FILE_BYTES) {
        fclose(f);
        return tf_error_set(err, TF_ERR_DATA, "%s: %lld bytes, larger than a vocabulary can be (%zu)",
                            path, (long long)st.st_size, TOK_MAX_FILE_BYTES);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory (%zu bytes)", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(buf);
        return tf_error_set(err, TF_ERR_DATA, "%s: read error", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return TF_OK;
}

/* vocab.txt: line i (0-based) is the token of id i. */
static tf_status parse_vocab_txt(const char *path, const char *data, size_t len, vocab_build *b,
                                 tf_error *err)
{
    size_t pos = 0;
    long line = 0;
    while (pos < len) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        line++;
        if (line > INT32_MAX - 1)
            return tf_error_set(err, TF_ERR_DATA, "%s:%ld: more lines than ids can number", path, line);
        size_t tl = end - pos;
        if (!tok_utf8_valid(data + pos, tl))
            return tf_error_set(err, TF_ERR_DATA, "%s:%ld: invalid UTF-8", path, line);
        tl = trim_end(data + pos, tl); /* also drops the '\r' of CRLF files */
        if (tl > TOK_MAX_TOKEN_BYTES)
            return tf_error_set(err, TF_ERR_DATA, "%s:%ld: token of %zu bytes (the limit is %d)",
                                path, line, tl, TOK_MAX_TOKEN_BYTES);
        if (build_add(b, data + pos, tl, (int32_t)(line - 1), line))
            return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
        pos = end + 1;
    }
    if (b->n == 0) return tf_error_set(err, TF_ERR_DATA, "%s:0: empty vocab", path);
    return TF_OK;
}

/* ------------------------------------------------------ tokenizer.json */

typedef struct json_settings {
    int lowercase, strip_accents, chinese, clean; /* -1 = not given */
    char unk[TOK_MAX_TOKEN_BYTES + 1], cls[TOK_MAX_TOKEN_BYTES + 1], sep[TOK_MAX_TOKEN_BYTES + 1],
        pad[TOK_MAX_TOKEN_BYTES + 1];
    int32_t cls_id, sep_id; /* from the post-processor */
    int max_word_chars;
    char prefix[TOK_MAX_PREFIX + 1];
    int decoder_cleanup;
} json_settings;

static int json_flag(json_t *obj, const char *key, int dflt)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_boolean(v)) return json_is_true(v);
    return dflt;
}

static tf_status copy_str(const char *path, const char *what, json_t *v, char *dst, size_t cap,
                          tf_error *err)
{
    if (!json_is_string(v))
        return tf_error_set(err, TF_ERR_DATA, "%s: %s is missing or not a string", path, what);
    size_t n = json_string_length(v);
    if (n >= cap)
        return tf_error_set(err, TF_ERR_DATA, "%s: %s is %zu bytes long (the limit is %zu)", path,
                            what, n, cap - 1);
    memcpy(dst, json_string_value(v), n);
    dst[n] = '\0';
    if (memchr(dst, '\0', n))
        return tf_error_set(err, TF_ERR_DATA, "%s: %s contains a NUL character", path, what);
    return TF_OK;
}

/* The special token id of a TemplateProcessing piece {"SpecialToken": {"id": name}}. */
static tf_status template_special(const char *path, json_t *pp, json_t *piece, int32_t *id,
                                  int *type_id, tf_error *err)
{
    json_t *st = json_object_get(piece, "SpecialToken");
    json_t *name = json_object_get(st, "id");
    if (!json_is_string(name))
        return tf_error_set(err, TF_ERR_DATA, "%s: post_processor: expected a SpecialToken piece", path);
    json_t *spec = json_object_get(json_object_get(pp, "special_tokens"), json_string_value(name));
    json_t *ids = json_object_get(spec, "ids");
    if (!json_is_array(ids) || json_array_size(ids) != 1 || !json_is_integer(json_array_get(ids, 0)))
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: post_processor: special token %s must have exactly one id", path,
                            json_string_value(name));
    json_int_t v = json_integer_value(json_array_get(ids, 0));
    if (v < 0 || v > INT32_MAX)
        return tf_error_set(err, TF_ERR_DATA, "%s: post_processor: id %lld out of range", path,
                            (long long)v);
    *id = (int32_t)v;
    *type_id = (int)json_integer_value(json_object_get(st, "type_id"));
    return TF_OK;
}

static tf_status template_sequence(const char *path, json_t *piece, const char *want, int type_id,
                                   tf_error *err)
{
    json_t *seq = json_object_get(piece, "Sequence");
    json_t *id = json_object_get(seq, "id");
    if (!json_is_string(id) || strcmp(json_string_value(id), want) != 0 ||
        json_integer_value(json_object_get(seq, "type_id")) != type_id)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: post_processor: only BERT's template [CLS] A [SEP] (B:1 [SEP]:1) "
                            "is supported",
                            path);
    return TF_OK;
}

static tf_status parse_post_processor(const char *path, json_t *pp, json_settings *js, tf_error *err)
{
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (!type)
        return tf_error_set(err, TF_ERR_DATA, "%s: post_processor is missing (tfcore needs BERT's "
                            "[CLS]/[SEP] template)", path);
    if (strcmp(type, "BertProcessing") == 0) {
        json_t *cls = json_object_get(pp, "cls"), *sep = json_object_get(pp, "sep");
        if (!json_is_array(cls) || !json_is_array(sep) ||
            !json_is_integer(json_array_get(cls, 1)) || !json_is_integer(json_array_get(sep, 1)))
            return tf_error_set(err, TF_ERR_DATA, "%s: post_processor: BertProcessing needs cls and sep",
                                path);
        json_int_t c = json_integer_value(json_array_get(cls, 1));
        json_int_t s = json_integer_value(json_array_get(sep, 1));
        if (c < 0 || c > INT32_MAX || s < 0 || s > INT32_MAX)
            return tf_error_set(err, TF_ERR_DATA, "%s: post_processor: id out of range", path);
        js->cls_id = (int32_t)c;
        js->sep_id = (int32_t)s;
        return TF_OK;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return tf_error_set(err, TF_ERR_DATA, "%s: post_processor type %s is not supported", path, type);
    json_t *single = json_object_get(pp, "single"), *pair = json_object_get(pp, "pair");
    if (json_array_size(single) != 3 || json_array_size(pair) != 5)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: post_processor: only BERT's template [CLS] A [SEP] (B:1 [SEP]:1) "
                            "is supported",
                            path);
    int32_t ids[5];
    int types[5];
    tf_status st;
    if ((st = template_special(path, pp, json_array_get(single, 0), &ids[0], &types[0], err)) ||
        (st = template_sequence(path, json_array_get(single, 1), "A", 0, err)) ||
        (st = template_special(path, pp, json_array_get(single, 2), &ids[1], &types[1], err)) ||
        (st = template_special(path, pp, json_array_get(pair, 0), &ids[2], &types[2], err)) ||
        (st = template_sequence(path, json_array_get(pair, 1), "A", 0, err)) ||
        (st = template_special(path, pp, json_array_get(pair, 2), &ids[3], &types[3], err)) ||
        (st = template_sequence(path, json_array_get(pair, 3), "B", 1, err)) ||
        (st = template_special(path, pp, json_array_get(pair, 4), &ids[4], &types[4], err)))
        return st;
    if (ids[2] != ids[0] || ids[3] != ids[1] || ids[4] != ids[1] || types[0] || types[1] ||
        types[2] || types[3] || types[4] != 1)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: post_processor: only BERT's template [CLS] A [SEP] (B:1 [SEP]:1) "
                            "is supported",
                            path);
    js->cls_id = ids[0];
    js->sep_id = ids[1];
    return TF_OK;
}

static tf_status parse_tokenizer_json(const char *path, const char *data, size_t len,
                                      vocab_build *b, vocab_build *added, json_settings *js,
                                      tf_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    tf_status st = TF_OK;
    json_t *model = json_object_get(root, "model");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(model) || (mtype && strcmp(mtype, "WordPiece") != 0) || !json_is_object(vocab)) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: model is %s, tfcore reads WordPiece models", path,
                          mtype ? mtype : "missing or has no vocab");
        goto out;
    }
    if ((st = copy_str(path, "model.unk_token", json_object_get(model, "unk_token"), js->unk,
                       sizeof js->unk, err)))
        goto out;
    json_t *pre = json_object_get(model, "continuing_subword_prefix");
    if (pre && !json_is_null(pre) &&
        (st = copy_str(path, "model.continuing_subword_prefix", pre, js->prefix, sizeof js->prefix, err)))
        goto out;
    json_t *mx = json_object_get(model, "max_input_chars_per_word");
    if (mx && !json_is_null(mx)) {
        json_int_t v = json_integer_value(mx);
        if (!json_is_integer(mx) || v < 0 || v > INT32_MAX) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: model.max_input_chars_per_word must be an "
                              "integer in [0, 2^31)", path);
            goto out;
        }
        js->max_word_chars = (int)v;
    }
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id > INT32_MAX - 1) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: model.vocab[\"%.64s\"]: id must be an integer "
                              "in [0, 2^31-1)", path, key);
            goto out;
        }
        size_t kl = strlen(key);
        if (kl > TOK_MAX_TOKEN_BYTES) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: model.vocab: token of %zu bytes (the limit is %d)",
                              path, kl, TOK_MAX_TOKEN_BYTES);
            goto out;
        }
        if (build_add(b, key, kl, (int32_t)id, 0)) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
            goto out;
        }
    }
    if (b->n == 0) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: empty vocab", path);
        goto out;
    }

    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm)) {
        const char *nt = json_string_value(json_object_get(norm, "type"));
        if (!nt || strcmp(nt, "BertNormalizer") != 0) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: normalizer %s is not supported (BertNormalizer is)",
                              path, nt ? nt : "without a type");
            goto out;
        }
        js->clean = json_flag(norm, "clean_text", 1);
        js->chinese = json_flag(norm, "handle_chinese_chars", 1);
        js->lowercase = json_flag(norm, "lowercase", 1);
        js->strip_accents = json_flag(norm, "strip_accents", -1);
    } else { /* no normalizer: the text is used as it is */
        js->clean = js->chinese = js->lowercase = js->strip_accents = 0;
    }
    json_t *pt = json_object_get(root, "pre_tokenizer");
    const char *ptt = json_string_value(json_object_get(pt, "type"));
    if (!ptt || strcmp(ptt, "BertPreTokenizer") != 0) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: pre_tokenizer %s is not supported (BertPreTokenizer is)",
                          path, ptt ? ptt : "missing");
        goto out;
    }
    if ((st = parse_post_processor(path, json_object_get(root, "post_processor"), js, err))) goto out;
    json_t *dec = json_object_get(root, "decoder");
    const char *dt = json_string_value(json_object_get(dec, "type"));
    if (!dt || strcmp(dt, "WordPiece") != 0) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: decoder %s is not supported (WordPiece is)", path,
                          dt ? dt : "missing");
        goto out;
    }
    js->decoder_cleanup = json_flag(dec, "cleanup", 1);
    json_t *padding = json_object_get(root, "padding");
    json_t *pad_tok = json_object_get(padding, "pad_token");
    if (json_is_string(pad_tok) &&
        (st = copy_str(path, "padding.pad_token", pad_tok, js->pad, sizeof js->pad, err)))
        goto out;

    json_t *at = json_object_get(root, "added_tokens");
    size_t i;
    json_t *t;
    json_array_foreach(at, i, t) {
        json_t *content = json_object_get(t, "content");
        json_int_t id = json_integer_value(json_object_get(t, "id"));
        if (!json_is_string(content) || !json_is_integer(json_object_get(t, "id")) || id < 0 ||
            id > INT32_MAX) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: added_tokens[%zu] needs a content string and an id",
                              path, i);
            goto out;
        }
        if (json_flag(t, "single_word", 0) || json_flag(t, "lstrip", 0) || json_flag(t, "rstrip", 0) ||
            json_flag(t, "normalized", 0)) {
            st = tf_error_set(err, TF_ERR_DATA,
                              "%s: added token \"%.64s\" uses single_word/lstrip/rstrip/normalized, "
                              "which tfcore does not support",
                              path, json_string_value(content));
            goto out;
        }
        size_t cl = json_string_length(content);
        if (cl == 0 || cl > TOK_MAX_TOKEN_BYTES) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: added_tokens[%zu]: content of %zu bytes", path, i, cl);
            goto out;
        }
        if (build_add(added, json_string_value(content), cl, (int32_t)id,
                      json_flag(t, "special", 0))) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
            goto out;
        }
    }
out:
    json_decref(root);
    return st;
}

/* ---------------------------------------------------------- assembling */

static tf_status add_matched_token(tf_tokenizer *tok, const char *s, size_t len, int32_t id,
                                   int special, tf_error *err)
{
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps) return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
    size_t n = tok_utf8_decode((const unsigned char *)s, len, cps);
    tok_added *a = realloc(tok->added, (size_t)(tok->n_added + 1) * sizeof *a);
    if (!a) {
        free(cps);
        return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
    }
    tok->added = a;
    /* keep the list longest first: the first match at a position is the longest */
    int k = tok->n_added;
    while (k > 0 && tok->added[k - 1].len < (int32_t)n) {
        tok->added[k] = tok->added[k - 1];
        k--;
    }
    tok->added[k] = (tok_added){cps, (int32_t)n, id, special};
    tok->n_added++;
    if (cps[0] < 0x80)
        tok->added_first_ascii[cps[0] >> 3] |= (uint8_t)(1u << (cps[0] & 7));
    else
        tok->added_first_other = 1;
    return TF_OK;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static tf_status assemble(tf_tokenizer *tok, const char *path, vocab_build *b, int from_txt,
                          tf_error *err)
{
    int32_t max_id = -1;
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].id > max_id) max_id = b->e[i].id;
    /* ids must be dense: [0, number of tokens) */
    if (!from_txt && (size_t)max_id + 1 != b->n)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: model.vocab has %zu tokens but ids up to %d; tfcore needs ids 0..%zu",
                            path, b->n, max_id, b->n - 1);
    if (b->pool_len > UINT32_MAX - 1)
        return tf_error_set(err, TF_ERR_DATA, "%s: vocabulary too large", path);
    tok->vocab_size = max_id + 1;
    tok->pool = b->pool;
    tok->pool_len = b->pool_len;
    b->pool = NULL;
    tok->tok_off = malloc((size_t)tok->vocab_size * sizeof *tok->tok_off);
    tok->tok_len = malloc((size_t)tok->vocab_size * sizeof *tok->tok_len);
    if (!tok->tok_off || !tok->tok_len || table_init(&tok->whole, b->n))
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    for (int32_t i = 0; i < tok->vocab_size; i++) tok->tok_off[i] = UINT32_MAX;
    for (size_t i = 0; i < b->n; i++) {
        vocab_entry *e = &b->e[i];
        if (tok->tok_off[e->id] != UINT32_MAX)
            return tf_error_set(err, TF_ERR_DATA, "%s: model.vocab: id %d is used twice", path, e->id);
        int32_t old = table_put(&tok->whole, tok->pool, (uint32_t)e->off, e->len, e->id);
        tok->tok_off[e->id] = (uint32_t)e->off;
        tok->tok_len[e->id] = e->len;
        if (old >= 0) {
            /* Hugging Face keeps the last line (a dict); the earlier id loses its token */
            tok->tok_off[old] = UINT32_MAX;
            tf_warn("%s:%ld: duplicate token \"%.64s\" (also line %d); id %d is used, as in Hugging Face",
                    path, e->line, tok->pool + e->off, old + 1, e->id);
        }
    }
    size_t ncont = 0;
    for (int32_t id = 0; id < tok->vocab_size; id++)
        if (tok->tok_off[id] != UINT32_MAX && tok->tok_len[id] >= tok->prefix_len &&
            memcmp(tok->pool + tok->tok_off[id], tok->prefix, tok->prefix_len) == 0)
            ncont++;
    if (table_init(&tok->cont, ncont)) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    for (int32_t id = 0; id < tok->vocab_size; id++)
        if (tok->tok_off[id] != UINT32_MAX && tok->tok_len[id] >= tok->prefix_len &&
            memcmp(tok->pool + tok->tok_off[id], tok->prefix, tok->prefix_len) == 0)
            table_put(&tok->cont, tok->pool, tok->tok_off[id] + tok->prefix_len,
                      tok->tok_len[id] - tok->prefix_len, id);
    return TF_OK;
}

static tf_status require_special(tf_tokenizer *tok, const char *path, tf_special_token which,
                                 const char *name, tf_error *err)
{
    int32_t id = tf_tokenizer_token_to_id(tok, name, strlen(name));
    if (id < 0 && which != TF_TOKEN_MASK)
        return tf_error_set(err, TF_ERR_DATA, "%s: the vocabulary has no %s token", path, name);
    tok->special[which] = id;
    return TF_OK;
}

static int pick(int opt, int file, int dflt)
{
    return opt >= 0 ? (opt != 0) : file >= 0 ? file : dflt;
}

static tf_status load_file(tf_tokenizer *tok, const char *path, const tf_tokenizer_options *opt,
                           tf_error *err)
{
    char *data = NULL;
    size_t len = 0;
    tf_status st = read_file(path, &data, &len, err);
    if (st) return st;
    size_t lead = 0;
    while (lead < len && (data[lead] == ' ' || data[lead] == '\t' || data[lead] == '\n' ||
                          data[lead] == '\r'))
        lead++;
    int is_json = has_suffix(path, ".json") || (lead < len && data[lead] == '{');
    vocab_build b = {0}, added = {0};
    json_settings js;
    memset(&js, 0, sizeof js);
    js.lowercase = js.strip_accents = js.chinese = js.clean = -1;
    js.cls_id = js.sep_id = -1;
    js.max_word_chars = 100;
    js.decoder_cleanup = 1;
    strcpy(js.prefix, "##");
    strcpy(js.unk, "[UNK]");
    strcpy(js.pad, "[PAD]");
    if (is_json)
        st = parse_tokenizer_json(path, data, len, &b, &added, &js, err);
    else
        st = parse_vocab_txt(path, data, len, &b, err);
    free(data);
    if (st) goto out;

    memcpy(tok->prefix, js.prefix, sizeof tok->prefix);
    tok->prefix_len = (uint32_t)strlen(js.prefix);
    tok->max_word_chars = js.max_word_chars;
    tok->decoder_cleanup = js.decoder_cleanup;
    if ((st = assemble(tok, path, &b, !is_json, err))) goto out;

    int lower = pick(opt ? opt->do_lower_case : -1, js.lowercase, 1);
    tok->opt.size = sizeof tok->opt;
    tok->opt.do_lower_case = lower;
    tok->opt.strip_accents = pick(opt ? opt->strip_accents : -1, js.strip_accents, lower);
    tok->opt.tokenize_chinese_chars = pick(opt ? opt->tokenize_chinese_chars : -1, js.chinese, 1);
    tok->opt.clean_text = pick(opt ? opt->clean_text : -1, js.clean, 1);

    if ((st = require_special(tok, path, TF_TOKEN_UNK, js.unk, err)) ||
        (st = require_special(tok, path, TF_TOKEN_PAD, js.pad, err)) ||
        (st = require_special(tok, path, TF_TOKEN_MASK, "[MASK]", err)))
        goto out;
    if (is_json) {
        if (js.cls_id >= tok->vocab_size || js.sep_id >= tok->vocab_size) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: post_processor ids [CLS]=%d [SEP]=%d are not in "
                              "the vocabulary", path, js.cls_id, js.sep_id);
            goto out;
        }
        tok->special[TF_TOKEN_CLS] = js.cls_id;
        tok->special[TF_TOKEN_SEP] = js.sep_id;
        for (size_t i = 0; i < added.n; i++) {
            const char *s = added.pool + added.e[i].off;
            int32_t id = added.e[i].id;
            if (tf_tokenizer_token_to_id(tok, s, added.e[i].len) != id) {
                st = tf_error_set(err, TF_ERR_DATA, "%s: added token \"%.64s\" (id %d) is not that "
                                  "token of model.vocab; tfcore does not support extra added tokens",
                                  path, s, id);
                goto out;
            }
            /* added.e[i].line holds the "special" flag */
            if ((st = add_matched_token(tok, s, added.e[i].len, id, added.e[i].line != 0, err))) goto out;
        }
    } else {
        if ((st = require_special(tok, path, TF_TOKEN_CLS, "[CLS]", err)) ||
            (st = require_special(tok, path, TF_TOKEN_SEP, "[SEP]", err)))
            goto out;
        /* BertTokenizerFast matches its five special tokens in the raw text */
        for (int w = 0; w < 5; w++)
            if (tok->special[w] >= 0 &&
                (st = add_matched_token(tok, special_default[w], strlen(special_default[w]),
                                        tok->special[w], 1, err)))
                goto out;
    }
out:
    build_free(&b);
    build_free(&added);
    return st;
}

/* ------------------------------------------------------------ public API */

void tf_tokenizer_options_init_size(tf_tokenizer_options *opt, size_t size)
{
    if (!opt) return;
    tf_tokenizer_options o;
    o.size = sizeof o;
    o.do_lower_case = -1;
    o.strip_accents = -1;
    o.tokenize_chinese_chars = -1;
    o.clean_text = -1;
    if (size > sizeof o) size = sizeof o; /* a newer caller: its extra fields stay as they are */
    if (size < sizeof o.size) return;
    memcpy(opt, &o, size);
    opt->size = (uint32_t)size;
}

tf_status tf_tokenizer_load(const char *path, const tf_tokenizer_options *opt, tf_tokenizer **out,
                            tf_error *err)
{
    *out = NULL;
    if (!path) return tf_error_set(err, TF_ERR_USAGE, "tokenizer: no vocabulary path given");
    if (opt && opt->size < sizeof(tf_tokenizer_options))
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: options of size %u, expected %zu "
                            "(use tf_tokenizer_options_init)", opt->size, sizeof(tf_tokenizer_options));
    struct stat st;
    char *file = NULL;
    tf_tokenizer_options merged;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t n = strlen(path) + 32;
        file = malloc(n);
        if (!file) return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
        snprintf(file, n, "%s/tokenizer.json", path);
        if (stat(file, &st) != 0) snprintf(file, n, "%s/vocab.txt", path);
        if (stat(file, &st) != 0) {
            free(file);
            return tf_error_set(err, TF_ERR_DATA, "%s: no tokenizer.json or vocab.txt in this directory",
                                path);
        }
        /* A folder is read as transformers' AutoTokenizer reads a BERT model's:
         * BertTokenizerFast's constructor arguments — tokenizer_config.json's,
         * else its defaults do_lower_case True, strip_accents None (= follow
         * lowercasing), tokenize_chinese_chars True — replace tokenizer.json's
         * normalizer flags. What the caller set overrides both. */
        tf_tokenizer_options_init(&merged);
        if (opt) merged = *opt, merged.size = sizeof merged;
        tf_tokenizer_config tc = {-1, -1, -1};
        snprintf(file, n, "%s/tokenizer_config.json", path);
        if (lstat(file, &st) == 0) {
            tf_status cs = tf_tokenizer_config_read(file, &tc, err);
            if (cs) {
                free(file);
                return cs;
            }
        }
        if (merged.do_lower_case < 0) merged.do_lower_case = tc.do_lower_case >= 0 ? tc.do_lower_case : 1;
        if (merged.strip_accents < 0) merged.strip_accents = tc.strip_accents >= 0 ? tc.strip_accents : merged.do_lower_case;
        if (merged.tokenize_chinese_chars < 0)
            merged.tokenize_chinese_chars = tc.tokenize_chinese_chars >= 0 ? tc.tokenize_chinese_chars : 1;
        opt = &merged;
        snprintf(file, n, "%s/tokenizer.json", path);
        if (stat(file, &st) != 0) snprintf(file, n, "%s/vocab.txt", path);
    }
    tf_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        free(file);
        return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
    }
    for (int i = 0; i < 5; i++) tok->special[i] = -1;
    tf_status s = load_file(tok, file ? file : path, opt, err);
    free(file);
    if (s) {
        tf_tokenizer_free(tok);
        return s;
    }
    *out = tok;
    return TF_OK;
}

void tf_tokenizer_free(tf_tokenizer *tok)
{
    if (!tok) return;
    free(tok->pool);
    free(tok->tok_off);
    free(tok->tok_len);
    free(tok->whole.slots);
    free(tok->cont.slots);
    for (int i = 0; i < tok->n_added; i++) free(tok->added[i].cps);
    free(tok->added);
    free(tok);
}

void tf_tokenizer_get_options(const tf_tokenizer *tok, tf_tokenizer_options *out)
{
    *out = tok->opt;
}

int32_t tf_tokenizer_vocab_size(const tf_tokenizer *tok)
{
    return tok->vocab_size;
}

int32_t tf_tokenizer_token_to_id(const tf_tokenizer *tok, const char *token, size_t len)
{
    if (!token || len > UINT32_MAX) return -1;
    return tok_table_find(&tok->whole, tok->pool, token, (uint32_t)len);
}

const char *tf_tokenizer_id_to_token(const tf_tokenizer *tok, int32_t id)
{
    if (id < 0 || id >= tok->vocab_size || tok->tok_off[id] == UINT32_MAX) return NULL;
    return tok->pool + tok->tok_off[id];
}

int32_t tf_tokenizer_special_id(const tf_tokenizer *tok, tf_special_token which)
{
    if ((int)which < 0 || (int)which > 4) return -1;
    return tok->special[which];
}

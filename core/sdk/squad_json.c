/* squad_json.c — loading SQuAD files: the dataset (v1.1 / v2.0), predictions
 * ({"id": "text"}) and no-answer probabilities ({"id": 0.93}).
 *
 * jansson parses the whole document; everything kept is copied into the
 * dataset's arena and the JSON tree is freed. Every step is linear in the
 * file size: answer offsets go through one code-point -> byte table per
 * paragraph, ids through a hash map. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "squad_internal.h"
#include "tfcore/file_read.h"
#include "tfcore/log.h"

/* ---- JSON documents ------------------------------------------------------- */

static json_t *load_failed(const char *name, const json_error_t *je, tf_error *err)
{
    tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", name, je->line, je->column, je->text);
    return NULL;
}

json_t *squad_json_load_file(const char *path, tf_error *err)
{
    FILE *f;
    if (tf_file_fopen_read(path, NULL, TF_ERR_DATA, &f, err) != TF_OK) return NULL;
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    int read_failed = ferror(f);
    fclose(f);
    if (read_failed) {
        json_decref(root);
        tf_error_set(err, TF_ERR_DATA, "%s: read error", path);
        return NULL;
    }
    return root ? root : load_failed(path, &je, err);
}

json_t *squad_json_load_buffer(const char *data, size_t len, const char *name, tf_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(data, len, 0, &je);
    return root ? root : load_failed(name, &je, err);
}

/* ---- the dataset ------------------------------------------------------------- */

/* Where a record is, for messages: "data[3].paragraphs[1].qas[0]". */
typedef struct where {
    size_t art, par, qa, ans;
    int depth; /* 1 article, 2 paragraph, 3 question, 4 answer */
} where;

static const char *where_str(const where *w, char *buf, size_t n)
{
    switch (w->depth) {
    case 1: snprintf(buf, n, "data[%zu]", w->art); break;
    case 2: snprintf(buf, n, "data[%zu].paragraphs[%zu]", w->art, w->par); break;
    case 3: snprintf(buf, n, "data[%zu].paragraphs[%zu].qas[%zu]", w->art, w->par, w->qa); break;
    default:
        snprintf(buf, n, "data[%zu].paragraphs[%zu].qas[%zu].answers[%zu]", w->art, w->par, w->qa,
                 w->ans);
    }
    return buf;
}

static tf_status ill_typed(const char *file, const where *w, const char *key, const char *tname,
                           tf_error *err)
{
    char at[128];
    return tf_error_set(err, TF_ERR_DATA, "%s: %s: '%s' is not %s", file,
                        where_str(w, at, sizeof at), key, tname);
}

/* A member of obj with the given JSON type; fills err when missing or ill-typed. */
static json_t *member(json_t *obj, const char *key, json_type type, const char *tname,
                      const char *file, const where *w, tf_error *err)
{
    char at[128];
    json_t *v = json_object_get(obj, key);
    if (!v) {
        tf_error_set(err, TF_ERR_DATA, "%s: %s: missing '%s'", file, where_str(w, at, sizeof at),
                     key);
        return NULL;
    }
    if (json_typeof(v) != type) {
        ill_typed(file, w, key, tname, err);
        return NULL;
    }
    return v;
}

static int is_object(json_t *v, const char *file, const where *w, tf_error *err)
{
    char at[128];
    if (json_is_object(v)) return 1;
    tf_error_set(err, TF_ERR_DATA, "%s: %s: is not an object", file, where_str(w, at, sizeof at));
    return 0;
}

static size_t utf8_length(const char *s, size_t bytes)
{
    size_t n = 0;
    for (size_t i = 0; i < bytes; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Loader state: growing arrays, the per-paragraph offset table, warnings. */
typedef struct loader {
    const char *file;
    tf_squad_storage *st;
    tf_squad_example *ex; /* [ex_cap] */
    size_t n_ex, ex_cap;
    size_t *first_ans; /* [ex_cap]: index of each example's first answer in ans */
    size_t first_cap;
    tf_squad_answer *ans; /* [ans_cap]; examples point into it once it stops moving */
    size_t n_ans, ans_cap;
    size_t *cp_byte; /* [cp_cap]: byte offset of each code point of the context */
    size_t cp_cap;
    squad_idmap ids;
    int saw_impossible;
} loader;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > ((size_t)-1) / 2 / elem) return -1;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Fill L->cp_byte for a context of n code points (plus the end position). */
static int build_cp_table(loader *L, const char *ctx, size_t bytes, size_t n)
{
    if (grow((void **)&L->cp_byte, &L->cp_cap, n + 1, sizeof *L->cp_byte) != 0) return -1;
    size_t k = 0;
    for (size_t i = 0; i < bytes; i++)
        if (((unsigned char)ctx[i] & 0xC0) != 0x80) L->cp_byte[k++] = i;
    L->cp_byte[k] = bytes;
    return 0;
}

/* Print a snippet of s: at most ~60 bytes, cut at a code point boundary. */
static int snippet_len(const char *s)
{
    size_t n = strlen(s);
    if (n <= 60) return (int)n;
    n = 60;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return (int)n;
}

static tf_status load_question(loader *L, json_t *qa, const where *wq, const char *title,
                               const char *ctx, size_t ctx_bytes, size_t ctx_len, size_t ctx_index,
                               int *cp_ready, size_t *n_warned, tf_error *err)
{
    if (!is_object(qa, L->file, wq, err)) return TF_ERR_DATA;
    json_t *id = member(qa, "id", JSON_STRING, "a string", L->file, wq, err);
    json_t *question =
        id ? member(qa, "question", JSON_STRING, "a string", L->file, wq, err) : NULL;
    json_t *answers =
        question ? member(qa, "answers", JSON_ARRAY, "an array", L->file, wq, err) : NULL;
    if (!answers) return TF_ERR_DATA;
    json_t *imp = json_object_get(qa, "is_impossible");
    if (imp && !json_is_boolean(imp))
        return ill_typed(L->file, wq, "is_impossible", "true or false", err);
    if (imp) L->saw_impossible = 1;

    if (grow((void **)&L->ex, &L->ex_cap, L->n_ex + 1, sizeof *L->ex) != 0 ||
        grow((void **)&L->first_ans, &L->first_cap, L->n_ex + 1, sizeof *L->first_ans) != 0)
        goto oom;
    tf_squad_example *e = &L->ex[L->n_ex];
    memset(e, 0, sizeof *e);
    e->id = squad_storage_strndup(L->st, json_string_value(id), json_string_length(id));
    e->question =
        squad_storage_strndup(L->st, json_string_value(question), json_string_length(question));
    if (!e->id || !e->question) goto oom;
    e->title = title;
    e->context = ctx;
    e->context_bytes = ctx_bytes;
    e->context_len = ctx_len;
    e->context_index = ctx_index;
    e->is_impossible = imp ? json_is_true(imp) : 0;
    e->n_answers = json_array_size(answers);
    L->first_ans[L->n_ex] = L->n_ans;

    where wa = *wq;
    wa.depth = 4;
    for (size_t a = 0; a < e->n_answers; a++) {
        wa.ans = a;
        json_t *ja = json_array_get(answers, a);
        if (!is_object(ja, L->file, &wa, err)) return TF_ERR_DATA;
        json_t *text = member(ja, "text", JSON_STRING, "a string", L->file, &wa, err);
        json_t *start =
            text ? member(ja, "answer_start", JSON_INTEGER, "an integer", L->file, &wa, err) : NULL;
        if (!start) return TF_ERR_DATA;
        if (grow((void **)&L->ans, &L->ans_cap, L->n_ans + 1, sizeof *L->ans) != 0) goto oom;
        tf_squad_answer *an = &L->ans[L->n_ans++];
        size_t tbytes = json_string_length(text);
        an->text = squad_storage_strndup(L->st, json_string_value(text), tbytes);
        if (!an->text) goto oom;
        an->start = (int64_t)json_integer_value(start);
        an->start_byte = -1;
        an->aligned = 0;
        size_t tlen = utf8_length(an->text, tbytes);
        if (an->start >= 0 && (uint64_t)an->start <= ctx_len &&
            tlen <= ctx_len - (size_t)an->start) {
            if (!*cp_ready) {
                if (build_cp_table(L, ctx, ctx_bytes, ctx_len) != 0) goto oom;
                *cp_ready = 1;
            }
            size_t b0 = L->cp_byte[an->start], b1 = L->cp_byte[(size_t)an->start + tlen];
            if (b1 - b0 == tbytes && memcmp(ctx + b0, an->text, tbytes) == 0) {
                an->aligned = 1;
                an->start_byte = (int64_t)b0;
            }
        }
        if (!an->aligned) {
            if (!e->misaligned && (*n_warned)++ < SQUAD_WARN_MAX)
                tf_warn("%s: question '%s': answer \"%.*s\" is not at answer_start %lld of its "
                        "context; kept for evaluation, skipped in training",
                        L->file, e->id, snippet_len(an->text), an->text, (long long)an->start);
            e->misaligned = 1;
        }
    }
    L->n_ex++;
    return TF_OK;
oom:
    return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", L->file);
}

static tf_status load_tree(loader *L, json_t *root, tf_squad_dataset *ds, tf_error *err)
{
    where w = {0, 0, 0, 0, 0};
    if (!json_is_object(root))
        return tf_error_set(err, TF_ERR_DATA, "%s: top level is not an object", L->file);
    json_t *data = json_object_get(root, "data");
    if (!data) return tf_error_set(err, TF_ERR_DATA, "%s: missing 'data'", L->file);
    if (!json_is_array(data))
        return tf_error_set(err, TF_ERR_DATA, "%s: 'data' is not an array", L->file);
    json_t *version = json_object_get(root, "version");
    if (version && !json_is_string(version))
        return tf_error_set(err, TF_ERR_DATA, "%s: 'version' is not a string", L->file);
    ds->version_string = squad_storage_strndup(L->st, version ? json_string_value(version) : "",
                                               version ? json_string_length(version) : 0);
    if (!ds->version_string) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", L->file);

    size_t n_warned = 0, n_ctx = 0;
    for (w.art = 0; w.art < json_array_size(data); w.art++) {
        w.depth = 1;
        json_t *art = json_array_get(data, w.art);
        if (!is_object(art, L->file, &w, err)) return TF_ERR_DATA;
        json_t *jt = json_object_get(art, "title");
        if (jt && !json_is_string(jt)) return ill_typed(L->file, &w, "title", "a string", err);
        const char *title = squad_storage_strndup(L->st, jt ? json_string_value(jt) : "",
                                                  jt ? json_string_length(jt) : 0);
        json_t *pars = member(art, "paragraphs", JSON_ARRAY, "an array", L->file, &w, err);
        if (!title || !pars)
            return title ? TF_ERR_DATA
                         : tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", L->file);
        for (w.par = 0; w.par < json_array_size(pars); w.par++) {
            w.depth = 2;
            json_t *par = json_array_get(pars, w.par);
            if (!is_object(par, L->file, &w, err)) return TF_ERR_DATA;
            json_t *jc = member(par, "context", JSON_STRING, "a string", L->file, &w, err);
            json_t *qas = jc ? member(par, "qas", JSON_ARRAY, "an array", L->file, &w, err) : NULL;
            if (!qas) return TF_ERR_DATA;
            size_t cbytes = json_string_length(jc);
            const char *ctx = squad_storage_strndup(L->st, json_string_value(jc), cbytes);
            if (!ctx) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", L->file);
            size_t clen = utf8_length(ctx, cbytes);
            int cp_ready = 0;
            for (w.qa = 0; w.qa < json_array_size(qas); w.qa++) {
                w.depth = 3;
                tf_status s = load_question(L, json_array_get(qas, w.qa), &w, title, ctx, cbytes,
                                            clen, n_ctx, &cp_ready, &n_warned, err);
                if (s != TF_OK) return s;
            }
            n_ctx++;
        }
    }
    if (L->n_ex == 0)
        return tf_error_set(err, TF_ERR_DATA, "%s: no questions (empty dataset)", L->file);
    ds->n_contexts = n_ctx;
    return TF_OK;
}

/* Counts, duplicate ids, pointers from indices: the pass after the tree. */
static tf_status finish(loader *L, tf_squad_dataset *ds, tf_error *err)
{
    size_t n_warned = 0;
    if (squad_idmap_init(&L->ids, L->n_ex) != 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", L->file);
    for (size_t i = 0; i < L->n_ex; i++) {
        tf_squad_example *e = &L->ex[i];
        e->answers = e->n_answers ? L->ans + L->first_ans[i] : NULL;
        if (e->n_answers == 0) ds->n_unanswerable++;
        if (e->misaligned) ds->n_misaligned++;
        int inserted;
        size_t *first = squad_idmap_put(&L->ids, e->id, &inserted);
        if (!first) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", L->file);
        if (inserted) {
            *first = i;
        } else {
            ds->n_duplicate_ids++;
            if (n_warned++ < SQUAD_WARN_MAX)
                tf_warn("%s: question id '%s' appears again (question %zu, first %zu)", L->file,
                        e->id, i, *first);
        }
    }
    if (ds->n_misaligned > SQUAD_WARN_MAX)
        tf_warn("%s: %zu questions in all have an answer not at its answer_start (the first %d "
                "listed above)",
                L->file, ds->n_misaligned, SQUAD_WARN_MAX);
    if (ds->n_duplicate_ids > SQUAD_WARN_MAX)
        tf_warn("%s: %zu repeated question ids in all (the first %d listed above)", L->file,
                ds->n_duplicate_ids, SQUAD_WARN_MAX);
    ds->version = TF_SQUAD_V1;
    const char *v = ds->version_string;
    if (L->saw_impossible || v[0] == '2' || (v[0] == 'v' && v[1] == '2')) ds->version = TF_SQUAD_V2;
    ds->n_examples = L->n_ex;
    ds->examples = L->ex;
    L->st->examples = L->ex; /* the storage owns the arrays from now on */
    L->st->answers = L->ans;
    L->ex = NULL;
    L->ans = NULL;
    return TF_OK;
}

static tf_status load_root(json_t *root, const char *file, tf_squad_dataset **out, tf_error *err)
{
    *out = NULL;
    loader L;
    memset(&L, 0, sizeof L);
    L.file = file;
    tf_squad_dataset *ds = calloc(1, sizeof *ds);
    L.st = squad_storage_new();
    tf_status s;
    if (!ds || !L.st) {
        s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", file);
    } else {
        ds->storage = L.st;
        s = load_tree(&L, root, ds, err);
        if (s == TF_OK) s = finish(&L, ds, err);
    }
    json_decref(root);
    free(L.ex);
    free(L.ans);
    free(L.first_ans);
    free(L.cp_byte);
    squad_idmap_free(&L.ids);
    if (s != TF_OK) {
        if (ds)
            tf_squad_free(ds);
        else
            squad_storage_free(L.st);
        return s;
    }
    *out = ds;
    return TF_OK;
}

tf_status tf_squad_load(const char *path, tf_squad_dataset **out, tf_error *err)
{
    *out = NULL;
    json_t *root = squad_json_load_file(path, err);
    return root ? load_root(root, path, out, err) : TF_ERR_DATA;
}

tf_status tf_squad_load_buffer(const char *data, size_t len, const char *name,
                               tf_squad_dataset **out, tf_error *err)
{
    *out = NULL;
    json_t *root = squad_json_load_buffer(data, len, name, err);
    return root ? load_root(root, name, out, err) : TF_ERR_DATA;
}

void tf_squad_free(tf_squad_dataset *ds)
{
    if (!ds) return;
    squad_storage_free(ds->storage);
    free(ds);
}

/* ---- predictions and no-answer probabilities ----------------------------------- */

/* Both files are one object {id: value}; jansson keeps a repeated key at its
 * first position with its last value, as Python's json.load. */
static tf_status load_map(const char *path, int probs, size_t *n_out, void **items_out,
                          tf_squad_storage **st_out, tf_error *err)
{
    *n_out = 0;
    *items_out = NULL;
    *st_out = NULL;
    json_t *root = squad_json_load_file(path, err);
    if (!root) return TF_ERR_DATA;
    tf_status s = TF_OK;
    tf_squad_storage *st = NULL;
    if (!json_is_object(root)) {
        s = tf_error_set(err, TF_ERR_DATA, "%s: top level is not an object", path);
        goto done;
    }
    size_t n = json_object_size(root);
    st = squad_storage_new();
    size_t elem = probs ? sizeof(tf_squad_na_prob) : sizeof(tf_squad_prediction);
    void *items = st ? squad_storage_alloc(st, (n ? n : 1) * elem) : NULL; /* [n] */
    if (!items) {
        s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
        goto done;
    }
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        char *id = squad_storage_strndup(st, key, strlen(key));
        if (!id) {
            s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
            goto done;
        }
        if (probs) {
            tf_squad_na_prob *p = (tf_squad_na_prob *)items + i;
            if (!json_is_number(v)) {
                s = tf_error_set(err, TF_ERR_DATA,
                                 "%s: '%s': no-answer probability is not a number", path, key);
                goto done;
            }
            p->id = id;
            p->prob = json_number_value(v);
            p->is_integer = json_is_integer(v);
            p->iprob = p->is_integer ? (long long)json_integer_value(v) : 0;
        } else {
            tf_squad_prediction *p = (tf_squad_prediction *)items + i;
            if (!json_is_string(v)) {
                s = tf_error_set(err, TF_ERR_DATA, "%s: '%s': prediction is not a string", path,
                                 key);
                goto done;
            }
            p->id = id;
            p->text = squad_storage_strndup(st, json_string_value(v), json_string_length(v));
            if (!p->text) {
                s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
                goto done;
            }
        }
        i++;
    }
    *n_out = i;
    *items_out = items;
    *st_out = st;
    st = NULL;
done:
    squad_storage_free(st);
    json_decref(root);
    return s;
}

tf_status tf_squad_load_predictions(const char *path, tf_squad_predictions *out, tf_error *err)
{
    void *items;
    tf_status s = load_map(path, 0, &out->n, &items, &out->storage, err);
    out->items = items;
    return s;
}

tf_status tf_squad_load_na_probs(const char *path, tf_squad_na_probs *out, tf_error *err)
{
    void *items;
    tf_status s = load_map(path, 1, &out->n, &items, &out->storage, err);
    out->items = items;
    return s;
}

void tf_squad_predictions_free(tf_squad_predictions *p)
{
    if (!p) return;
    squad_storage_free(p->storage);
    p->storage = NULL;
    p->items = NULL;
    p->n = 0;
}

void tf_squad_na_probs_free(tf_squad_na_probs *p)
{
    if (!p) return;
    squad_storage_free(p->storage);
    p->storage = NULL;
    p->items = NULL;
    p->n = 0;
}

/* imdb_read.c — the IMDB readers: aclImdb folders, review/sentiment CSV,
 * text/label JSONL (see imdb_read.h for the formats and the order). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "imdb_read.h"
#include "tfcore/file_read.h"

/* ---- the result arrays ------------------------------------------------------ */

void tf_imdb_data_free(tf_imdb_data *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n; i++)
        free(d->texts[i]);
    free(d->texts);
    free(d->lengths);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

typedef struct builder {
    tf_imdb_data d;
    size_t cap;
} builder;

/* Append a copy of text[0..len); -1 when out of memory. */
static int add_review(builder *b, const char *text, size_t len, int label)
{
    if (b->d.n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char **t = realloc(b->d.texts, cap * sizeof *t);
        if (t) b->d.texts = t;
        size_t *l = realloc(b->d.lengths, cap * sizeof *l);
        if (l) b->d.lengths = l;
        int *y = realloc(b->d.labels, cap * sizeof *y);
        if (y) b->d.labels = y;
        if (!t || !l || !y) return -1;
        b->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, text, len);
    copy[len] = '\0';
    b->d.texts[b->d.n] = copy;
    b->d.lengths[b->d.n] = len;
    b->d.labels[b->d.n] = label;
    b->d.n++;
    return 0;
}

static tf_status finish(builder *b, const char *name, tf_imdb_data *out, tf_error *err)
{
    if (b->d.n == 0) {
        tf_imdb_data_free(&b->d);
        return tf_error_set(err, TF_ERR_DATA, "%s: no reviews (empty dataset)", name);
    }
    *out = b->d;
    return TF_OK;
}

static tf_status fail(builder *b, tf_status s)
{
    tf_imdb_data_free(&b->d);
    return s;
}

/* ---- bytes ------------------------------------------------------------------- */

/* The offset of the first byte that is not valid UTF-8 (as Python's strict
 * decoder: no overlong forms, no surrogates, nothing above U+10FFFF) or is
 * NUL (*nul = 1 then); len when all is well. */
static size_t utf8_check(const unsigned char *s, size_t len, int *nul)
{
    *nul = 0;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c == 0) {
                *nul = 1;
                return i;
            }
            i++;
            continue;
        }
        size_t n;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF)
            n = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0)
                lo = 0xA0; /* overlong */
            else if (c == 0xED)
                hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0)
                lo = 0x90; /* overlong */
            else if (c == 0xF4)
                hi = 0x8F; /* above U+10FFFF */
        } else {
            return i;
        }
        if (len - i < n || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < n; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += n;
    }
    return len;
}

/* The whole file in one malloc (NUL-terminated); NULL with err filled. */
static char *read_file(const char *path, size_t *len, tf_error *err)
{
    FILE *f;
    if (tf_file_fopen_read(path, NULL, TF_ERR_DATA, &f, err) != TF_OK) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        tf_error_set(err, TF_ERR_DATA, "%s: cannot stat: %s", path, strerror(errno));
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory (%zu bytes)", path, size);
        return NULL;
    }
    size_t got = fread(buf, 1, size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != size) {
        free(buf);
        tf_error_set(err, TF_ERR_DATA, "%s: read error", path);
        return NULL;
    }
    buf[size] = '\0';
    *len = size;
    return buf;
}

/* ---- aclImdb folders -------------------------------------------------------------- */

typedef struct review_file {
    unsigned long long id, rating;
    char *name;
} review_file;

static int cmp_review_file(const void *a, const void *b)
{
    const review_file *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    if (x->rating != y->rating) return x->rating < y->rating ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* "<digits>_<digits>.txt" -> id, rating; 0 when the name is not of that form. */
static int parse_review_name(const char *name, unsigned long long *id, unsigned long long *rating)
{
    const char *p = name;
    unsigned long long v[2];
    for (int k = 0; k < 2; k++) {
        if (*p < '0' || *p > '9') return 0;
        v[k] = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++digits > 18) return 0;
            v[k] = v[k] * 10 + (unsigned)(*p - '0');
        }
        if (k == 0 && *p++ != '_') return 0;
    }
    if (strcmp(p, ".txt") != 0) return 0;
    *id = v[0];
    *rating = v[1];
    return 1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Read the <id>_<rating>.txt files of DIR/CLASS in order into b with the given label. */
static tf_status read_class(const char *dir, const char *cls, int label, builder *b, tf_error *err)
{
    char sub[4096];
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, cls) >= sizeof sub)
        return tf_error_set(err, TF_ERR_DATA, "%s: path too long", dir);
    DIR *d = opendir(sub);
    if (!d) return tf_error_set(err, TF_ERR_DATA, "%s: cannot open: %s", sub, strerror(errno));
    review_file *files = NULL; /* [n] */
    size_t n = 0, cap = 0;
    tf_status s = TF_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !ends_with(de->d_name, ".txt")) continue;
        review_file rf;
        if (!parse_review_name(de->d_name, &rf.id, &rf.rating)) {
            s = tf_error_set(err, TF_ERR_DATA, "%s/%s: file name is not <id>_<rating>.txt", sub,
                             de->d_name);
            break;
        }
        if (n == cap) {
            size_t c = cap ? cap * 2 : 1024;
            review_file *f = realloc(files, c * sizeof *f);
            if (!f) {
                s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", sub);
                break;
            }
            files = f;
            cap = c;
        }
        rf.name = strdup(de->d_name);
        if (!rf.name) {
            s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", sub);
            break;
        }
        files[n++] = rf;
    }
    closedir(d);
    /* an empty class folder would train on the other class alone, silently */
    if (s == TF_OK && n == 0)
        s = tf_error_set(err, TF_ERR_DATA, "%s: no <id>_<rating>.txt reviews in this folder (both neg/ and pos/ "
                         "need some)", sub);
    if (s == TF_OK && n > 0) qsort(files, n, sizeof *files, cmp_review_file);
    for (size_t i = 0; i < n && s == TF_OK; i++) {
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", sub, files[i].name);
        size_t len;
        char *text = read_file(path, &len, err);
        if (!text) {
            s = err ? err->code : TF_ERR_DATA;
            break;
        }
        int nul;
        size_t bad = utf8_check((const unsigned char *)text, len, &nul);
        if (bad < len)
            s = tf_error_set(err, TF_ERR_DATA, "%s: %s at byte %zu", path,
                             nul ? "NUL byte" : "invalid UTF-8", bad);
        else if (add_review(b, text, len, label) != 0)
            s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(files[i].name);
    free(files);
    return s;
}

tf_status tf_imdb_read_folder(const char *dir, tf_imdb_data *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    builder b = {{0}, 0};
    tf_status s = read_class(dir, "neg", 0, &b, err);
    if (s == TF_OK) s = read_class(dir, "pos", 1, &b, err);
    if (s != TF_OK) return fail(&b, s);
    return finish(&b, dir, out, err);
}

/* ---- CSV ----------------------------------------------------------------------------- */

typedef struct csv {
    const char *name;
    const char *p, *end;
    size_t line; /* the line p is on, from 1 */
    char *field; /* [field_cap] the dequoted fields of the record, NUL-separated */
    size_t field_len, field_cap;
    size_t start[3]; /* offsets in field of up to 3 fields (more are only counted) */
    size_t len[3];
    size_t nfields;
} csv;

static int field_put(csv *c, char ch)
{
    if (c->field_len == c->field_cap) {
        size_t cap = c->field_cap ? c->field_cap * 2 : 4096;
        char *f = realloc(c->field, cap);
        if (!f) return -1;
        c->field = f;
        c->field_cap = cap;
    }
    c->field[c->field_len++] = ch;
    return 0;
}

/* Consume a record end at p (LF, CRLF or CR); 1 if there was one. */
static int eat_newline(csv *c)
{
    if (c->p < c->end && *c->p == '\r') {
        c->p++;
        if (c->p < c->end && *c->p == '\n') c->p++;
        c->line++;
        return 1;
    }
    if (c->p < c->end && *c->p == '\n') {
        c->p++;
        c->line++;
        return 1;
    }
    return 0;
}

/* Parse one record into c->field / start / len / nfields. `row` names it in
 * messages ("header" when 0). Returns TF_OK, or an error; *eof = 1 when no
 * record was left. */
static tf_status csv_record(csv *c, size_t row, int *eof, tf_error *err)
{
    char what[48];
    if (row)
        snprintf(what, sizeof what, "row %zu: ", row);
    else
        snprintf(what, sizeof what, "header: ");
    *eof = c->p >= c->end;
    c->field_len = 0;
    c->nfields = 0;
    if (*eof) return TF_OK;
    for (;;) {
        size_t f0 = c->field_len;
        if (c->p < c->end && *c->p == '"') {
            size_t qline = c->line;
            c->p++;
            for (;;) {
                if (c->p >= c->end)
                    return tf_error_set(err, TF_ERR_DATA,
                                        "%s:%zu: %sunterminated quoted field (its quote opens on "
                                        "this line)",
                                        c->name, qline, what);
                char ch = *c->p++;
                if (ch == '"') {
                    if (c->p < c->end && *c->p == '"')
                        c->p++;
                    else
                        break;
                } else if (ch == '\n' || (ch == '\r' && !(c->p < c->end && *c->p == '\n'))) {
                    c->line++;
                }
                if (field_put(c, ch) != 0) goto oom;
            }
            if (c->p < c->end && *c->p != ',' && *c->p != '\r' && *c->p != '\n') {
                unsigned char ch = (unsigned char)*c->p;
                char shown[8];
                if (ch >= 0x20 && ch < 0x7F)
                    snprintf(shown, sizeof shown, "'%c'", ch);
                else
                    snprintf(shown, sizeof shown, "0x%02X", ch);
                return tf_error_set(err, TF_ERR_DATA,
                                    "%s:%zu: %sunexpected %s after a closing quote (a quote "
                                    "inside a quoted field is written \"\")",
                                    c->name, c->line, what, shown);
            }
        } else {
            while (c->p < c->end && *c->p != ',' && *c->p != '\r' && *c->p != '\n') {
                if (*c->p == '"')
                    return tf_error_set(err, TF_ERR_DATA,
                                        "%s:%zu: %sstray '\"' in an unquoted field (quote the "
                                        "field and double its quotes)",
                                        c->name, c->line, what);
                if (field_put(c, *c->p++) != 0) goto oom;
            }
        }
        if (c->nfields < 3) {
            c->start[c->nfields] = f0;
            c->len[c->nfields] = c->field_len - f0;
        }
        c->nfields++;
        if (field_put(c, '\0') != 0) goto oom;
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        eat_newline(c);
        break;
    }
    return TF_OK;
oom:
    return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", c->name);
}

tf_status tf_imdb_parse_csv(const char *buf, size_t len, const char *name, tf_imdb_data *out,
                            tf_error *err)
{
    memset(out, 0, sizeof *out);
    builder b = {{0}, 0};
    csv c = {name, buf, buf + len, 1, NULL, 0, 0, {0}, {0}, 0};
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) c.p += 3; /* UTF-8 BOM */
    tf_status s;
    int eof;
    if ((s = csv_record(&c, 0, &eof, err)) != TF_OK) goto done;
    if (eof) {
        s = tf_error_set(err, TF_ERR_DATA,
                         "%s:1: missing the header 'review,sentiment' (empty file)", name);
        goto done;
    }
    if (c.nfields != 2 || strcmp(c.field + c.start[0], "review") != 0 ||
        strcmp(c.field + c.start[1], "sentiment") != 0) {
        s = tf_error_set(err, TF_ERR_DATA,
                         "%s:1: header is '%.60s%s%.60s%s', expected "
                         "'review,sentiment'",
                         name, c.field + c.start[0], c.nfields > 1 ? "," : "",
                         c.nfields > 1 ? c.field + c.start[1] : "", c.nfields > 2 ? ",..." : "");
        goto done;
    }
    for (size_t row = 1;; row++) {
        /* skip blank lines */
        while (c.p < c.end && (*c.p == '\n' || *c.p == '\r'))
            eat_newline(&c);
        size_t line = c.line;
        const char *raw = c.p;
        if ((s = csv_record(&c, row, &eof, err)) != TF_OK) goto done;
        if (eof) break;
        if (c.nfields != 2) {
            s = tf_error_set(err, TF_ERR_DATA,
                             "%s:%zu: row %zu: expected 2 fields "
                             "(review,sentiment), found %zu",
                             name, line, row, c.nfields);
            goto done;
        }
        int nul;
        size_t raw_len = (size_t)(c.p - raw);
        size_t bad = utf8_check((const unsigned char *)raw, raw_len, &nul);
        if (bad < raw_len) {
            s = tf_error_set(err, TF_ERR_DATA, "%s:%zu: row %zu: %s at byte %zu of the file", name,
                             line, row, nul ? "NUL byte" : "invalid UTF-8",
                             (size_t)(raw - buf) + bad);
            goto done;
        }
        const char *sent = c.field + c.start[1];
        int label = strcmp(sent, "positive") == 0 ? 1 : strcmp(sent, "negative") == 0 ? 0 : -1;
        if (label < 0) {
            s = tf_error_set(err, TF_ERR_DATA,
                             "%s:%zu: row %zu: unknown sentiment '%.40s' "
                             "(expected positive or negative)",
                             name, line, row, sent);
            goto done;
        }
        if (add_review(&b, c.field + c.start[0], c.len[0], label) != 0) {
            s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", name);
            goto done;
        }
    }
    s = finish(&b, name, out, err);
    free(c.field);
    return s;
done:
    free(c.field);
    return fail(&b, s);
}

tf_status tf_imdb_read_csv(const char *path, tf_imdb_data *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    size_t len;
    char *buf = read_file(path, &len, err);
    if (!buf) return err ? err->code : TF_ERR_DATA;
    tf_status s = tf_imdb_parse_csv(buf, len, path, out, err);
    free(buf);
    return s;
}

/* ---- JSONL ------------------------------------------------------------------------------ */

static int json_label(json_t *v)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        return i == 0 || i == 1 ? (int)i : -1;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "neg") == 0 || strcmp(s, "negative") == 0) return 0;
        if (strcmp(s, "pos") == 0 || strcmp(s, "positive") == 0) return 1;
    }
    return -1;
}

tf_status tf_imdb_parse_jsonl(const char *buf, size_t len, const char *name, tf_imdb_data *out,
                              tf_error *err)
{
    memset(out, 0, sizeof *out);
    builder b = {{0}, 0};
    const char *p = buf, *end = buf + len;
    for (size_t line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        int blank = 1;
        for (const char *q = p; q < e; q++)
            if (*q != ' ' && *q != '\t' && *q != '\r') blank = 0;
        if (blank) {
            p = next;
            continue;
        }
        /* jansson reads a raw NUL as the end of the text ("end of file expected") */
        const char *nul = memchr(p, '\0', (size_t)(e - p));
        if (nul)
            return fail(&b, tf_error_set(err, TF_ERR_DATA, "%s:%zu:%d: NUL byte; a JSONL line is text", name,
                                         line, (int)(nul - p) + 1));
        json_error_t je;
        json_t *obj = json_loadb(p, (size_t)(e - p), 0, &je);
        p = next;
        if (!obj)
            return fail(&b, tf_error_set(err, TF_ERR_DATA, "%s:%zu:%d: %s", name, line, je.column,
                                         je.text));
        tf_status s = TF_OK;
        json_t *text = json_is_object(obj) ? json_object_get(obj, "text") : NULL;
        json_t *lab = json_is_object(obj) ? json_object_get(obj, "label") : NULL;
        int label = lab ? json_label(lab) : -1;
        if (!json_is_object(obj)) {
            s = tf_error_set(err, TF_ERR_DATA, "%s:%zu: not a JSON object", name, line);
        } else if (!text || !json_is_string(text)) {
            s = tf_error_set(err, TF_ERR_DATA, "%s:%zu: %s", name, line,
                             text ? "'text' is not a string" : "missing 'text'");
        } else if (!lab) {
            s = tf_error_set(err, TF_ERR_DATA, "%s:%zu: missing 'label'", name, line);
        } else if (label < 0) {
            char *shown = json_dumps(lab, JSON_ENCODE_ANY | JSON_COMPACT);
            s = tf_error_set(err, TF_ERR_DATA,
                             "%s:%zu: label %.40s is not 0, 1, \"neg\", \"pos\", "
                             "\"negative\" or \"positive\"",
                             name, line, shown ? shown : "?");
            free(shown);
        } else if (add_review(&b, json_string_value(text), json_string_length(text), label) != 0) {
            s = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", name);
        }
        json_decref(obj);
        if (s != TF_OK) return fail(&b, s);
    }
    return finish(&b, name, out, err);
}

tf_status tf_imdb_read_jsonl(const char *path, tf_imdb_data *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    size_t len;
    char *buf = read_file(path, &len, err);
    if (!buf) return err ? err->code : TF_ERR_DATA;
    tf_status s = tf_imdb_parse_jsonl(buf, len, path, out, err);
    free(buf);
    return s;
}

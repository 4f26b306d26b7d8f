/* tokenizer_config.c — reading a model folder's tokenizer_config.json (the
 * keys of BertTokenizerFast's constructor that change ids), strictly: a file
 * that is not JSON, not an object, or holds one of these keys with the wrong
 * type is an error naming the file and the key, never a silent default (a
 * string "false" read as "not set" would lowercase a cased model). */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfcore/file_read.h"
#include "tfcore/tokenizer.h"

/* No tokenizer_config.json is this large; a larger one is a wrong file. */
#define TOK_CONFIG_MAX_BYTES ((size_t)16 << 20)

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* key: absent -> -1; true/false -> 1/0; null -> -1 when null_ok; else an error */
static tf_status read_flag(json_t *root, const char *label, const char *key, bool null_ok, int *out,
                           tf_error *err)
{
    *out = -1;
    json_t *v = json_object_get(root, key);
    if (!v || (null_ok && json_is_null(v))) return TF_OK;
    if (json_is_boolean(v)) {
        *out = json_is_true(v) ? 1 : 0;
        return TF_OK;
    }
    if (json_is_string(v))
        return tf_error_set(err, TF_ERR_DATA, "%s: \"%s\" must be true or false%s, got the string \"%.40s\"", label,
                            key, null_ok ? " (or null)" : "", json_string_value(v));
    return tf_error_set(err, TF_ERR_DATA, "%s: \"%s\" must be true or false%s, got %s", label, key,
                        null_ok ? " (or null)" : "", json_type_name(v));
}

tf_status tf_tokenizer_config_parse(const char *text, size_t len, const char *label, tf_tokenizer_config *out,
                                    tf_error *err)
{
    out->do_lower_case = out->strip_accents = out->tokenize_chinese_chars = -1;
    json_error_t je;
    /* integers as reals: transformers writes model_max_length = int(1e30)
     * (1000000000000000019884624838656), beyond jansson's json_int_t */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
    if (!root) return tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: not valid JSON: %s", label, je.line, je.column, je.text);
    tf_status st = TF_OK;
    tf_tokenizer_config c;
    if (!json_is_object(root))
        st = tf_error_set(err, TF_ERR_DATA, "%s: must be a JSON object, got %s", label, json_type_name(root));
    if (!st) st = read_flag(root, label, "do_lower_case", false, &c.do_lower_case, err);
    if (!st) st = read_flag(root, label, "strip_accents", true, &c.strip_accents, err);
    if (!st) st = read_flag(root, label, "tokenize_chinese_chars", false, &c.tokenize_chinese_chars, err);
    json_decref(root);
    if (!st) *out = c;
    return st;
}

tf_status tf_tokenizer_config_read(const char *path, tf_tokenizer_config *out, tf_error *err)
{
    out->do_lower_case = out->strip_accents = out->tokenize_chinese_chars = -1;
    FILE *f = NULL;
    /* the type is checked before anything is read: a FIFO would wait for a writer */
    tf_status ost = tf_file_fopen_read(path, NULL, TF_ERR_DATA, &f, err);
    if (ost) return ost;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return tf_error_set(err, TF_ERR_DATA, "cannot read %s: %s", path, strerror(errno));
    }
    if ((size_t)sb.st_size > TOK_CONFIG_MAX_BYTES) {
        fclose(f);
        return tf_error_set(err, TF_ERR_DATA, "%s: %lld bytes, too large for a tokenizer_config.json", path,
                            (long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory reading %s", path);
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    tf_status st = bad || got != n ? tf_error_set(err, TF_ERR_DATA, "%s: read error", path)
                                   : tf_tokenizer_config_parse(buf, n, path, out, err);
    free(buf);
    return st;
}

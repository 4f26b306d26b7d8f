/* cli_tokenize.c — `tfcore tokenize`: tokenize stdin lines with a WordPiece
 * vocabulary, one JSON line out per line in, the way BertTokenizerFast does.
 *
 *   tfcore tokenize --vocab FILE [--no-lower] [--max-length N] [--pair] [--json]
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "tfcore/tokenizer.h"

static const char *const usage_text =
    "usage: tfcore tokenize --vocab FILE [--no-lower] [--max-length N] [--pair] [--json]\n"
    "                       [--truncation STRATEGY] [--stride N] [--overflow] [--pad]\n"
    "                       [--no-special] [--strip-accents | --no-strip-accents]\n"
    "                       [--details] [--json-input] [--keep-going] [--max-line-bytes N]\n"
    "       tfcore tokenize --vocab FILE --decode [--skip-special-tokens] [--no-cleanup]\n"
    "\n"
    "Tokenize UTF-8 lines from stdin as Hugging Face's BertTokenizerFast does and\n"
    "write one JSON line per input line: the array of ids, with [CLS]/[SEP].\n"
    "\n"
    "  --vocab FILE          vocab.txt (line i = id i), tokenizer.json, or a model folder\n"
    "                        (tokenizer.json, else vocab.txt, with its tokenizer_config.json:\n"
    "                        the tokenizer training uses for that model)\n"
    "  --no-lower            cased model: no lowercasing and no accent stripping\n"
    "  --strip-accents       strip accents (NFD, drop Mn) even without lowercasing\n"
    "  --no-strip-accents    lowercase but keep accents\n"
    "  --max-length N        truncate to N tokens, [CLS]/[SEP] included\n"
    "  --truncation S        longest_first (default with --max-length), only_first,\n"
    "                        only_second, or none (--max-length then only pads)\n"
    "  --stride N            tokens shared by consecutive overflowing windows\n"
    "  --overflow            also write the overflowing windows: [[ids], [ids], ...],\n"
    "                        or with --json an \"overflowing\" list of objects\n"
    "  --pad                 pad to --max-length\n"
    "  --no-special          no [CLS]/[SEP]\n"
    "  --pair                each line is two texts separated by a TAB\n"
    "  --json                write objects {\"ids\", \"type_ids\", \"attention_mask\",\n"
    "                        \"offsets\"}; offsets are [start, end) in code points\n"
    "  --details             with --json: also \"sequence_ids\" and \"word_ids\" (null for\n"
    "                        added tokens and padding)\n"
    "  --json-input          each input line is a JSON string (with --pair: an array of\n"
    "                        two strings), so texts may hold newlines and TABs\n"
    "  --keep-going          on a line that cannot be encoded write {\"error\": MESSAGE}\n"
    "                        and go on (the exit code is still that of the first error)\n"
    "  --max-line-bytes N    refuse longer input lines (default 16777216)\n"
    "  --decode              read JSON arrays of ids instead; write each decoded text as\n"
    "                        a JSON string, as BertTokenizerFast.decode(ids)\n"
    "  --skip-special-tokens with --decode: drop [CLS] [SEP] [PAD] [MASK] [UNK]\n"
    "  --no-cleanup          with --decode: clean_up_tokenization_spaces=False\n"
    "\n"
    "Invalid UTF-8 bytes read as U+FFFD (as Python's errors=\"replace\"), which the\n"
    "tokenizer drops; offsets count them as one code point each.\n"
    "\n"
    "exit codes: 0 ok, 1 I/O error, 2 usage error, 5 bad vocabulary or input line\n";

#define DEFAULT_MAX_LINE ((size_t)16 << 20)

static int fail(tf_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(tf_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tfcore tokenize: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code ? (int)code : 1;
}

/* "tfcore tokenize: <message> (see tfcore tokenize --help)", exit code 2;
 * the same line as the other verbs' tf_cli_usage_error, written here so that
 * this file needs only libtfcore (tests/test_tokenizer.c links it). */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tfcore tokenize: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see tfcore tokenize --help)\n", stderr);
    va_end(ap);
    return TF_ERR_USAGE;
}

static int parse_count(const char *s, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno || v < 0 || v > max) return -1;
    *out = v;
    return 0;
}

/* One line of stdin without its '\n' (NUL bytes kept). 1 = a line, 0 = end
 * of input, -1 = longer than max (the rest of it is not read), -2 = I/O. */
static int read_line(FILE *in, char **buf, size_t *cap, size_t *len, size_t max)
{
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(in)) != EOF) {
        if (c == '\n') break;
        if (n >= max) return -1;
        if (n + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *p = realloc(*buf, nc);
            if (!p) return -2;
            *buf = p;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF) {
        if (ferror(in)) return -2;
        if (n == 0) return 0;
    }
    *len = n;
    return 1;
}

static void put_int(FILE *out, long v)
{
    char b[24];
    int k = 0;
    unsigned long u = v < 0 ? (unsigned long)(-(v + 1)) + 1 : (unsigned long)v;
    do {
        b[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) putc_unlocked('-', out);
    while (k) putc_unlocked(b[--k], out);
}

static void put_ints(FILE *out, const int32_t *v, int32_t a, int32_t b)
{
    putc_unlocked('[', out);
    for (int32_t i = a; i < b; i++) {
        if (i > a) putc_unlocked(',', out);
        put_int(out, v[i]);
    }
    putc_unlocked(']', out);
}

/* The fields of window w as a JSON object's members (no braces). */
static void put_window_fields(FILE *out, const tf_encoding *e, int32_t w, int details)
{
    int32_t a = e->window_start[w], b = e->window_start[w + 1];
    fputs("\"ids\":", out);
    put_ints(out, e->ids, a, b);
    fputs(",\"type_ids\":", out);
    put_ints(out, e->type_ids, a, b);
    fputs(",\"attention_mask\":", out);
    put_ints(out, e->attention_mask, a, b);
    fputs(",\"offsets\":[", out);
    for (int32_t i = a; i < b; i++) {
        if (i > a) putc_unlocked(',', out);
        putc_unlocked('[', out);
        put_int(out, e->offsets[2 * i]);
        putc_unlocked(',', out);
        put_int(out, e->offsets[2 * i + 1]);
        putc_unlocked(']', out);
    }
    putc_unlocked(']', out);
    if (details) {
        fputs(",\"sequence_ids\":[", out);
        for (int32_t i = a; i < b; i++) {
            if (i > a) putc_unlocked(',', out);
            if (e->sequence_ids[i] < 0)
                fputs("null", out);
            else
                put_int(out, e->sequence_ids[i]);
        }
        fputs("],\"word_ids\":[", out);
        for (int32_t i = a; i < b; i++) {
            if (i > a) putc_unlocked(',', out);
            if (e->word_ids[i] < 0)
                fputs("null", out);
            else
                put_int(out, e->word_ids[i]);
        }
        putc_unlocked(']', out);
    }
}

/* One output line: the kept window, and the overflowing ones if asked. */
static void put_encoding(FILE *out, const tf_encoding *e, int json, int overflow, int details)
{
    if (json) {
        putc_unlocked('{', out);
        put_window_fields(out, e, 0, details);
        if (overflow) {
            fputs(",\"overflowing\":[", out);
            for (int32_t w = 1; w < e->n_windows; w++) {
                if (w > 1) putc_unlocked(',', out);
                putc_unlocked('{', out);
                put_window_fields(out, e, w, details);
                putc_unlocked('}', out);
            }
            putc_unlocked(']', out);
        }
        putc_unlocked('}', out);
    } else if (overflow) {
        putc_unlocked('[', out);
        for (int32_t w = 0; w < e->n_windows; w++) {
            if (w) putc_unlocked(',', out);
            put_ints(out, e->ids, e->window_start[w], e->window_start[w + 1]);
        }
        putc_unlocked(']', out);
    } else {
        put_ints(out, e->ids, e->window_start[0], e->window_start[1]);
    }
    putc_unlocked('\n', out);
}

/* Encode one input line: raw UTF-8 (a TAB separates a pair) or, with
 * --json-input, a JSON string (a pair: an array of two strings). */
static tf_status encode_line(const tf_tokenizer *tok, const char *line, size_t len, int pair,
                             int json_input, const tf_encode_options *eo, tf_encoding *enc,
                             tf_error *err)
{
    const char *a = line ? line : "", *b = NULL;
    size_t alen = len, blen = 0;
    if (!json_input) {
        if (pair) {
            const char *tab = memchr(a, '\t', len);
            if (!tab) return tf_error_set(err, TF_ERR_DATA, "--pair needs two texts separated by a TAB");
            alen = (size_t)(tab - a);
            b = tab + 1;
            blen = len - alen - 1;
        }
        return tf_tokenizer_encode(tok, a, alen, b, blen, eo, enc, err);
    }
    json_error_t je;
    json_t *v = json_loadb(a, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) return tf_error_set(err, TF_ERR_DATA, "--json-input: column %d: %s", je.column, je.text);
    tf_status st;
    if (pair) {
        json_t *x = json_array_get(v, 0), *y = json_array_get(v, 1);
        if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(x) || !json_is_string(y))
            st = tf_error_set(err, TF_ERR_DATA, "--json-input --pair: expected [\"text\", \"text\"]");
        else
            st = tf_tokenizer_encode(tok, json_string_value(x), json_string_length(x),
                                     json_string_value(y), json_string_length(y), eo, enc, err);
    } else if (!json_is_string(v)) {
        st = tf_error_set(err, TF_ERR_DATA, "--json-input: expected a JSON string");
    } else {
        st = tf_tokenizer_encode(tok, json_string_value(v), json_string_length(v), NULL, 0, eo, enc, err);
    }
    json_decref(v);
    return st;
}

/* --decode: one JSON array of ids in, one JSON string out. */
static tf_status decode_line(const tf_tokenizer *tok, const char *line, size_t len, int skip_special,
                             int cleanup, tf_error *err)
{
    json_error_t je;
    json_t *v = json_loadb(line ? line : "", len, JSON_DECODE_ANY, &je);
    if (!v) return tf_error_set(err, TF_ERR_DATA, "--decode: column %d: %s", je.column, je.text);
    size_t n = json_array_size(v);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    tf_status st = TF_OK;
    if (!json_is_array(v)) st = tf_error_set(err, TF_ERR_DATA, "--decode: expected a JSON array of ids");
    if (!ids && !st) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        json_t *x = json_array_get(v, i);
        json_int_t id = json_integer_value(x);
        if (!json_is_integer(x) || id < INT32_MIN || id > INT32_MAX)
            st = tf_error_set(err, TF_ERR_DATA, "--decode: element %zu is not a 32-bit integer", i);
        else
            ids[i] = (int32_t)id;
    }
    char *text = NULL;
    size_t tl = 0;
    if (!st) st = tf_tokenizer_decode(tok, ids, n, skip_special, cleanup, &text, &tl, err);
    if (!st) {
        json_t *s = json_stringn(text, tl);
        char *out = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        if (out)
            printf("%s\n", out);
        else
            st = tf_error_set(err, TF_ERR_RUNTIME, "--decode: cannot write the text as JSON");
        free(out);
        json_decref(s);
    }
    free(text);
    free(ids);
    json_decref(v);
    return st;
}

int tf_cli_tokenize(int argc, char **argv)
{
    const char *vocab = NULL;
    int json = 0, pair = 0, overflow = 0, details = 0, json_input = 0, keep_going = 0;
    int decode = 0, skip_special = 0, cleanup = 1;
    long max_length = 0, stride = 0, max_line = (long)DEFAULT_MAX_LINE;
    const char *strategy = NULL;
    tf_tokenizer_options topt;
    tf_tokenizer_options_init(&topt);
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        /* options with a value: "--opt V" or "--opt=V" */
        static const char *const with_value[] = {"--vocab", "--max-length", "--truncation",
                                                 "--stride", "--max-line-bytes"};
        const char *name = NULL;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
            size_t n = strlen(with_value[k]);
            if (strncmp(a, with_value[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
                name = with_value[k];
                if (a[n] == '=')
                    val = a + n + 1;
                else if (i + 1 < argc)
                    val = argv[++i];
                else
                    return usage_error("%s needs a value", name);
                break;
            }
        }
        if (name) {
            if (strcmp(name, "--vocab") == 0) {
                vocab = val;
            } else if (strcmp(name, "--truncation") == 0) {
                strategy = val;
            } else {
                long *dst = strcmp(name, "--max-length") == 0 ? &max_length
                            : strcmp(name, "--stride") == 0   ? &stride
                                                              : &max_line;
                long lim = dst == &max_line ? (long)1 << 40 : 0x7fffffffL;
                if (parse_count(val, lim, dst) != 0 || (dst == &max_line && *dst == 0))
                    return usage_error("%s: '%s' is not a valid count", name, val);
            }
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(a, "--no-lower") == 0) {
            topt.do_lower_case = 0;
        } else if (strcmp(a, "--strip-accents") == 0) {
            topt.strip_accents = 1;
        } else if (strcmp(a, "--no-strip-accents") == 0) {
            topt.strip_accents = 0;
        } else if (strcmp(a, "--pair") == 0) {
            pair = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--details") == 0) {
            details = 1;
        } else if (strcmp(a, "--json-input") == 0) {
            json_input = 1;
        } else if (strcmp(a, "--keep-going") == 0) {
            keep_going = 1;
        } else if (strcmp(a, "--decode") == 0) {
            decode = 1;
        } else if (strcmp(a, "--skip-special-tokens") == 0) {
            skip_special = 1;
        } else if (strcmp(a, "--no-cleanup") == 0) {
            cleanup = 0;
        } else if (strcmp(a, "--overflow") == 0) {
            overflow = 1;
        } else if (strcmp(a, "--pad") == 0) {
            eo.pad_to_max_length = 1;
        } else if (strcmp(a, "--no-special") == 0) {
            eo.add_special_tokens = 0;
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!vocab) return usage_error("--vocab FILE is required");
    if (strategy) {
        if (strcmp(strategy, "longest_first") == 0)
            eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
        else if (strcmp(strategy, "only_first") == 0)
            eo.truncation = TF_TRUNCATE_ONLY_FIRST;
        else if (strcmp(strategy, "only_second") == 0)
            eo.truncation = TF_TRUNCATE_ONLY_SECOND;
        else if (strcmp(strategy, "none") == 0)
            eo.truncation = TF_TRUNCATE_NONE;
        else
            return usage_error("--truncation: '%s' is not longest_first, only_first, "
                                      "only_second or none", strategy);
        if (max_length == 0) return usage_error("--truncation needs --max-length");
    } else if (max_length > 0) {
        eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    }
    if ((eo.pad_to_max_length || overflow || stride) && max_length == 0)
        return usage_error("--pad, --overflow and --stride need --max-length");
    if (details && !json) return usage_error("--details goes with --json");
    if ((skip_special || !cleanup) && !decode)
        return usage_error("--skip-special-tokens and --no-cleanup go with --decode");
    eo.max_length = (int)max_length;
    eo.stride = (int)stride;
    eo.return_overflowing = overflow;

    tf_error err;
    tf_error_clear(&err);
    tf_tokenizer *tok = NULL;
    if (tf_tokenizer_load(vocab, &topt, &tok, &err) != TF_OK) return fail(err.code, "%s", err.msg);

    tf_encoding enc;
    tf_encoding_init(&enc);
    char *line = NULL;
    size_t cap = 0, len = 0;
    long lineno = 0;
    int rc = 0, r;
    while ((r = read_line(stdin, &line, &cap, &len, (size_t)max_line)) == 1) {
        lineno++;
        tf_status st;
        if (decode) {
            if ((st = decode_line(tok, line, len, skip_special, cleanup, &err)) == TF_OK) continue;
        } else if ((st = encode_line(tok, line, len, pair, json_input, &eo, &enc, &err)) == TF_OK) {
            put_encoding(stdout, &enc, json, overflow, details);
            continue;
        }
        if (st == TF_ERR_RUNTIME || !keep_going) {
            rc = fail(st, "stdin:%ld: %s", lineno, err.msg);
            break;
        }
        /* --keep-going: say why on this line's output and go on */
        if (rc == 0) rc = (int)st;
        json_t *o = json_pack("{s:s}", "error", err.msg);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        fprintf(stdout, "%s\n", text ? text : "{\"error\":\"?\"}");
        free(text);
        json_decref(o);
    }
    if (r == -1) rc = fail(TF_ERR_DATA, "stdin:%ld: line longer than %ld bytes (--max-line-bytes)",
                           lineno + 1, max_line);
    if (r == -2) rc = fail(TF_ERR_RUNTIME, "stdin:%ld: read error or out of memory", lineno + 1);
    if (fflush(stdout) != 0 && rc == 0) rc = fail(TF_ERR_RUNTIME, "writing stdout: %s", strerror(errno));
    free(line);
    tf_encoding_free(&enc);
    tf_tokenizer_free(tok);
    return rc;
}

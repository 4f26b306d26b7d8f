/* config_syntax.c — libconfig text helpers for the config module: number and
 * string formatting in libconfig syntax, the 32-bit integer literal check
 * that libconfig 1.5 lacks, reading config files, names of @include'd files.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_internal.h"
#include "tfcore/file_read.h"

bool cfgi_reserve(void *arrp, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return true;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return false;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / size) return false;
    void *old;
    memcpy(&old, arrp, sizeof old);
    void *p = realloc(old, ncap * size);
    if (!p) return false;
    memcpy(arrp, &p, sizeof p);
    *cap = ncap;
    return true;
}

void cfgi_format(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

void cfgi_format_double(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, "%s", v < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[48];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    /* enough digits that %g writes 500 rather than 5e+02 */
    double mag = fabs(v);
    if (mag >= 1 && mag < 1e16) {
        int int_digits = (int)floor(log10(mag)) + 1;
        if (int_digits > prec) prec = int_digits;
    }
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    snprintf(buf, n, "%s", tmp);
}

void cfgi_escape(const char *s, size_t max_chars, char *buf, size_t n)
{
    if (n == 0) return;
    size_t o = 0, i = 0;
    buf[0] = '\0';
    for (; s[i]; i++) {
        if (max_chars && i >= max_chars) break;
        unsigned char c = (unsigned char)s[i];
        char piece[8];
        if (c == '"' || c == '\\')
            snprintf(piece, sizeof piece, "\\%c", c);
        else if (c == '\n')
            snprintf(piece, sizeof piece, "\\n");
        else if (c == '\t')
            snprintf(piece, sizeof piece, "\\t");
        else if (c < 0x20 || c == 0x7f)
            snprintf(piece, sizeof piece, "\\x%02X", c);
        else {
            piece[0] = (char)c;
            piece[1] = '\0';
        }
        size_t len = strlen(piece);
        if (o + len + 4 >= n) break; /* keep room for "..." */
        memcpy(buf + o, piece, len);
        o += len;
    }
    if (s[i] && o + 3 < n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

const char *cfgi_type_name(int type)
{
    switch (type) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an int";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_BOOL: return "a bool";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_ARRAY:
    case CONFIG_TYPE_LIST: return "a list";
    case CONFIG_TYPE_GROUP: return "a group";
    }
    return "a setting";
}

void cfgi_describe(const config_setting_t *s, char *buf, size_t n)
{
    char num[48], str[CFGI_SHOW_MAX * 4 + 8];
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT: snprintf(buf, n, "int %d", config_setting_get_int(s)); break;
    case CONFIG_TYPE_INT64: snprintf(buf, n, "int %lld", config_setting_get_int64(s)); break;
    case CONFIG_TYPE_FLOAT:
        cfgi_format_double(config_setting_get_float(s), num, sizeof num);
        snprintf(buf, n, "float %s", num);
        break;
    case CONFIG_TYPE_BOOL:
        snprintf(buf, n, "bool %s", config_setting_get_bool(s) ? "true" : "false");
        break;
    case CONFIG_TYPE_STRING:
        cfgi_escape(config_setting_get_string(s), CFGI_SHOW_MAX, str, sizeof str);
        snprintf(buf, n, "string \"%s\"", str);
        break;
    default: snprintf(buf, n, "%s", cfgi_type_name(config_setting_type(s))); break;
    }
}

static bool name_start(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '*';
}
static bool name_char(int c)
{
    return name_start(c) || (c >= '0' && c <= '9') || c == '_' || c == '-';
}
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

bool cfgi_valid_name(const char *s, size_t len)
{
    if (len == 0 || !name_start((unsigned char)s[0])) return false;
    for (size_t i = 1; i < len; i++)
        if (!name_char((unsigned char)s[i])) return false;
    return true;
}

/* Does the number token tok[0..len) (well formed: libconfig parsed it) fit
 * the type libconfig gives it? */
static bool integer_token_fits(const char *tok, size_t len)
{
    size_t sign = len > 0 && (tok[0] == '-' || tok[0] == '+');
    bool hex = len >= sign + 2 && tok[sign] == '0' && (tok[sign + 1] == 'x' || tok[sign + 1] == 'X');
    if (!hex)
        for (size_t i = sign; i < len; i++)
            if (tok[i] == '.' || tok[i] == 'e' || tok[i] == 'E') return true; /* a float, any length */
    char buf[96];
    if (len >= sizeof buf) return false; /* far more digits than any 64-bit int */
    memcpy(buf, tok, len);
    buf[len] = '\0';
    const char *body = buf + sign;
    size_t blen = strlen(buf);
    bool is64 = false;
    while (blen > 0 && (buf[blen - 1] == 'L' || buf[blen - 1] == 'l')) {
        buf[--blen] = '\0';
        is64 = true;
    }
    errno = 0;
    char *end;
    if (hex) {
        unsigned long long v = strtoull(body + 2, &end, 16);
        if (errno == ERANGE || *end) return false;
        /* libconfig stores a plain hex literal in an int: 0xFFFFFFFF reads as -1 */
        return is64 ? true : v <= 0x7fffffffULL;
    }
    long long v = strtoll(buf, &end, 10);
    if (errno == ERANGE || *end) return false;
    return is64 || (v >= INT_MIN && v <= INT_MAX);
}

cfgi_lint_result cfgi_lint(const char *text, bool integers, int *line, char *literal, size_t n)
{
    int ln = 1;
    const char *p = text;
    while (*p) {
        unsigned char c = (unsigned char)*p;
        if (c == '\n') {
            ln++;
            p++;
        } else if (c == '#' || (c == '/' && p[1] == '/')) {
            while (*p && *p != '\n') p++;
        } else if (c == '/' && p[1] == '*') {
            int start = ln;
            p += 2;
            while (*p && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n') ln++;
                p++;
            }
            if (!*p) {
                *line = start;
                return CFGI_LINT_UNTERMINATED_COMMENT;
            }
            p += 2;
        } else if (c == '"') {
            int start = ln;
            p++;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1]) p++;
                if (*p == '\n') ln++;
                p++;
            }
            if (!*p) {
                *line = start;
                return CFGI_LINT_UNTERMINATED_STRING;
            }
            p++;
        } else if (name_start(c)) {
            while (name_char((unsigned char)*p)) p++;
        } else if (is_digit(c) || ((c == '-' || c == '+' || c == '.') &&
                                   (is_digit((unsigned char)p[1]) ||
                                    (p[1] == '.' && is_digit((unsigned char)p[2]))))) {
            const char *start = p;
            if (c == '-' || c == '+') p++;
            bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
            while (*p) {
                unsigned char d = (unsigned char)*p;
                if (is_digit(d) || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '.')
                    p++;
                else if ((d == '-' || d == '+') && !hex && (p[-1] == 'e' || p[-1] == 'E'))
                    p++;
                else
                    break;
            }
            size_t len = (size_t)(p - start);
            if (integers && !integer_token_fits(start, len)) {
                *line = ln;
                snprintf(literal, n, "%.*s", (int)(len < 64 ? len : 64), start);
                return CFGI_LINT_BAD_INTEGER;
            }
        } else {
            p++;
        }
    }
    return CFGI_LINT_OK;
}

bool cfgi_include_name_at(const char *text, int line, char *name, size_t n)
{
    const char *p = text;
    for (int ln = 1; ln < line && p; ln++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return false;
    const char *eol = strchr(p, '\n');
    if (!eol) eol = p + strlen(p);
    const char *inc = strstr(p, "@include");
    if (!inc || inc >= eol) return false;
    const char *q = memchr(inc, '"', (size_t)(eol - inc));
    if (!q) return false;
    q++;
    const char *e = memchr(q, '"', (size_t)(eol - q));
    if (!e) return false;
    snprintf(name, n, "%.*s", (int)(e - q), q);
    return true;
}

bool cfgi_next_include(const char **pos, int *line, char *name, size_t n)
{
    const char *p = *pos;
    bool at_line_start = p[0] != '\0';
    while (*p) {
        if (at_line_start) {
            const char *q = p;
            while (*q == ' ' || *q == '\t') q++;
            if (strncmp(q, "@include", 8) == 0 && (q[8] == ' ' || q[8] == '\t')) {
                q += 8;
                while (*q == ' ' || *q == '\t') q++;
                const char *e = *q == '"' ? strchr(q + 1, '"') : NULL;
                const char *eol = strchr(q, '\n');
                if (e && (!eol || e < eol)) {
                    snprintf(name, n, "%.*s", (int)(e - q - 1), q + 1);
                    *pos = e + 1;
                    return true;
                }
            }
        }
        at_line_start = false;
        if (*p == '\n') {
            (*line)++;
            at_line_start = true;
            p++;
        } else if (p[0] == '/' && p[1] == '*') {
            for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
                if (*p == '\n') (*line)++;
            if (*p) p += 2;
        } else {
            p++;
        }
    }
    *pos = p;
    return false;
}

tf_status cfgi_read_text_file(const char *path, char **out, tf_error *err)
{
    *out = NULL;
    FILE *f;
    tf_status ost = tf_file_fopen_read(path, "config file", TF_ERR_CONFIG, &f, err);
    if (ost != TF_OK) return ost;
    size_t cap = 4096, len = 0; /* buf: [cap] bytes, len used, NUL added at the end */
    char *buf = malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        if (len + 1 >= cap) {
            if (len > CFGI_MAX_FILE_BYTES) {
                free(buf);
                fclose(f);
                return tf_error_set(err, TF_ERR_CONFIG,
                                    "%s: config file is larger than the limit of %u bytes", path,
                                    CFGI_MAX_FILE_BYTES);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) goto oom;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return tf_error_set(err, TF_ERR_CONFIG, "%s: cannot read config file: %s", path,
                            strerror(e));
    }
    fclose(f);
    buf[len] = '\0';
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        size_t off = (size_t)(nul - buf);
        free(buf);
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: NUL byte at offset %zu; a config file is text", path, off);
    }
    /* a UTF-8 byte order mark (Windows editors write one) is not part of the text */
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) memmove(buf, buf + 3, len - 2);
    *out = buf;
    return TF_OK;
oom:
    free(buf);
    fclose(f);
    return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory reading the config file", path);
}

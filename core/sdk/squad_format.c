/* squad_format.c — printing SQuAD results the way the official scripts do:
 * json.dumps of an OrderedDict whose floats print as Python's repr(). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "squad_internal.h"

/* tmp holds x rounded to some number of digits ("[-]d.ddde+XX") that does
 * not read back as x. At a power of two the interval of decimals that read
 * back as x reaches twice as far above x as below, so the next decimal up
 * with as many digits may still read back: if it does, put it in tmp and
 * return 1. (Elsewhere the interval is symmetric and it never does.) */
static int next_up_digits(char *tmp, double x)
{
    char cand[40];
    char *e = strchr(tmp, 'e');
    if (!e) return 0;
    size_t n = (size_t)(e - tmp);
    memcpy(cand, tmp, n);
    int exp10 = atoi(e + 1);
    size_t first = cand[0] == '-' ? 1 : 0;
    size_t i = n;
    int carry = 1;
    while (carry && i > first) { /* add one in the last place */
        i--;
        if (cand[i] == '.') continue;
        if (cand[i] == '9') {
            cand[i] = '0';
        } else {
            cand[i]++;
            carry = 0;
        }
    }
    if (carry) { /* 9.99 -> 10.00: becomes 1.000 one decade up, same digit count */
        cand[first] = '1';
        exp10++;
    }
    snprintf(cand + n, sizeof cand - n, "e%+d", exp10);
    if (strtod(cand, NULL) != x) return 0;
    memcpy(tmp, cand, strlen(cand) + 1);
    return 1;
}

/* repr(float): the shortest decimal that reads back as x (with 1, 2, ..., 17
 * significant digits: the correctly rounded one, or the one above it), written in fixed notation
 * when the decimal point position decpt (x = 0.d1d2... * 10^decpt) satisfies -4 < decpt <= 16, else
 * as d.ddde+XX (at least two exponent digits); fixed notation always shows a ".0" when there is no
 * fraction. */
char *tf_squad_repr_double(double x, char buf[32])
{
    if (isnan(x)) return strcpy(buf, "NaN");
    if (isinf(x)) return strcpy(buf, x > 0 ? "Infinity" : "-Infinity");
    if (x == 0) return strcpy(buf, signbit(x) ? "-0.0" : "0.0");

    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x || next_up_digits(tmp, x)) break;
    }
    /* tmp = [-]d[.ddd]e(+|-)XX */
    const char *p = tmp;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp10 = atoi(p + 1);
    int decpt = exp10 + 1;

    char *o = buf;
    if (neg) *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++)
                *o++ = '0';
            memcpy(o, digits, (size_t)nd);
            o += nd;
        } else if (decpt >= nd) {
            memcpy(o, digits, (size_t)nd);
            o += nd;
            for (int i = nd; i < decpt; i++)
                *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else {
            memcpy(o, digits, (size_t)decpt);
            o += decpt;
            *o++ = '.';
            memcpy(o, digits + decpt, (size_t)(nd - decpt));
            o += nd - decpt;
        }
        *o = '\0';
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(nd - 1));
            o += nd - 1;
        }
        int e = decpt - 1;
        /* |e| <= 324 for a double; o is at most 20 bytes into buf */
        snprintf(o, (size_t)(buf + 32 - o), "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    return buf;
}

/* snprintf-style appending: keeps counting past cap so the caller learns the size */
typedef struct out_buf {
    char *buf;
    size_t cap, len;
} out_buf;

static void put(out_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int k = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) b->len += (size_t)k;
}

size_t tf_squad_result_format(const tf_squad_result *r, tf_squad_json_style style, char *buf,
                              size_t cap)
{
    out_buf b = {buf, cap, 0};
    if (buf && cap) buf[0] = '\0';
    if (r->n == 0) {
        put(&b, "{}");
        return b.len;
    }
    put(&b, style == TF_SQUAD_JSON_INDENT2 ? "{\n  " : "{");
    for (int i = 0; i < r->n; i++) {
        const tf_squad_metric *m = &r->metric[i];
        if (i > 0) put(&b, style == TF_SQUAD_JSON_INDENT2 ? ",\n  " : ", ");
        if (m->is_integer) {
            put(&b, "\"%s\": %lld", m->name, m->ivalue);
        } else {
            char num[32];
            put(&b, "\"%s\": %s", m->name, tf_squad_repr_double(m->value, num));
        }
    }
    put(&b, style == TF_SQUAD_JSON_INDENT2 ? "\n}" : "}");
    return b.len;
}

const tf_squad_metric *tf_squad_result_get(const tf_squad_result *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->metric[i].name, name) == 0) return &r->metric[i];
    return NULL;
}

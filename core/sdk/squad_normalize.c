/* squad_normalize.c — the official SQuAD normalize_answer(), in C.
 *
 *   def normalize_answer(s):
 *       white_space_fix(remove_articles(remove_punc(lower(s))))
 *
 * with Python's semantics for each step:
 *   lower            str.lower(): full Unicode lowercase, i.e. the simple
 *                    mapping (utf8proc) plus U+0130 -> "i\u0307" and the
 *                    Final_Sigma rule for U+03A3 (Python implements both);
 *   remove_punc      drops the 32 ASCII characters of string.punctuation;
 *   remove_articles  re.sub(r'\b(a|an|the)\b', ' ', text): a maximal run of
 *                    \w characters (Python: letters L*, numbers N*, '_')
 *                    that is exactly "a", "an" or "the" becomes one space;
 *   white_space_fix  ' '.join(text.split()), split on Python's whitespace.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "squad_internal.h"

/* ---- character classes (as CPython 3.11 defines them) --------------------- */

/* Py_UNICODE_ISSPACE: bidi classes WS, B, S and category Zs. */
static int py_isspace(int32_t c)
{
    if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* string.punctuation */
static int py_ispunct_ascii(int32_t c)
{
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
}

/* re's \w for str patterns: str.isalnum() or '_' (isalpha: L*; isdecimal,
 * isdigit, isnumeric: N*). */
static int py_isword(int32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return 1;
    default:
        return 0;
    }
}

/* Case_Ignorable (DerivedCoreProperties.txt): categories Mn Me Cf Lm Sk, or
 * Word_Break MidLetter / MidNumLet / Single_Quote. */
static int is_case_ignorable(int32_t c)
{
    switch (c) {
    case 0x0027: case 0x002E: case 0x003A: case 0x00B7: case 0x0387: case 0x055F:
    case 0x05F4: case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13:
    case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
        return 1;
    }
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK:
        return 1;
    default:
        return 0;
    }
}

/* Cased, asked only of characters that are not Case_Ignorable: Lu Ll Lt,
 * plus the Other_Lowercase / Other_Uppercase characters (PropList.txt) that
 * are not Case_Ignorable themselves. */
static int is_cased(int32_t c)
{
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
        return 1;
    default:
        break;
    }
    return c == 0xAA || c == 0xBA || (c >= 0x2160 && c <= 0x217F) ||
           (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
           (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

/* CPython's handle_capital_sigma(): U+03A3 lowercases to final U+03C2 when a
 * cased letter precedes it and none follows (Case_Ignorable ones skipped). */
static int32_t lower_sigma(const int32_t *cp, size_t n, size_t i)
{
    size_t j = i;
    while (j > 0 && is_case_ignorable(cp[j - 1])) j--;
    if (j == 0 || !is_cased(cp[j - 1])) return 0x3C3;
    j = i + 1;
    while (j < n && is_case_ignorable(cp[j])) j++;
    return (j == n || !is_cased(cp[j])) ? 0x3C2 : 0x3C3;
}

/* ---- the four steps --------------------------------------------------------- */

/* UTF-8 -> code points [*n]; invalid bytes read as U+FFFD. */
static int32_t *decode_utf8(const char *s, size_t len, size_t *n)
{
    int32_t *cp = malloc((len + 1) * sizeof *cp); /* [len + 1]: at most one per byte */
    if (!cp) return NULL;
    size_t k = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    utf8proc_ssize_t left = (utf8proc_ssize_t)len;
    while (left > 0) {
        utf8proc_int32_t c;
        utf8proc_ssize_t used = utf8proc_iterate(p, left, &c);
        if (used < 0) {
            c = 0xFFFD;
            used = 1;
        }
        cp[k++] = c;
        p += used;
        left -= used;
    }
    *n = k;
    return cp;
}

char *tf_squad_normalize_answer(const char *s)
{
    size_t len = strlen(s), n;
    int32_t *in = decode_utf8(s, len, &n);
    /* lowercase: U+0130 becomes two code points, so at most 2n */
    int32_t *t = in ? malloc((2 * n + 1) * sizeof *t) : NULL; /* [2n + 1] */
    if (!t) {
        free(in);
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = in[i];
        if (c == 0x130) {
            t[m++] = 'i';
            t[m++] = 0x307;
        } else if (c == 0x3A3) {
            t[m++] = lower_sigma(in, n, i);
        } else {
            t[m++] = c < 0x80 ? ((c >= 'A' && c <= 'Z') ? c + 32 : c) : utf8proc_tolower(c);
        }
    }
    free(in);

    /* remove_punc, in place */
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (!py_ispunct_ascii(t[i])) t[k++] = t[i];
    m = k;

    /* remove_articles: each word run that is a / an / the -> one space */
    k = 0;
    for (size_t i = 0; i < m;) {
        if (!py_isword(t[i])) {
            t[k++] = t[i++];
            continue;
        }
        size_t e = i;
        while (e < m && py_isword(t[e])) e++;
        size_t w = e - i;
        int article = (w == 1 && t[i] == 'a') || (w == 2 && t[i] == 'a' && t[i + 1] == 'n') ||
                      (w == 3 && t[i] == 't' && t[i + 1] == 'h' && t[i + 2] == 'e');
        if (article) {
            t[k++] = ' ';
        } else {
            memmove(t + k, t + i, w * sizeof *t);
            k += w;
        }
        i = e;
    }
    m = k;

    /* white_space_fix, written straight out as UTF-8 */
    char *out = malloc(4 * m + 1); /* [4m + 1]: at most 4 bytes per code point */
    if (!out) {
        free(t);
        return NULL;
    }
    size_t o = 0;
    int need_space = 0;
    for (size_t i = 0; i < m; i++) {
        if (py_isspace(t[i])) {
            need_space = o > 0;
            continue;
        }
        if (need_space) {
            out[o++] = ' ';
            need_space = 0;
        }
        o += (size_t)utf8proc_encode_char(t[i], (utf8proc_uint8_t *)out + o);
    }
    out[o] = '\0';
    free(t);
    return out;
}

/* ---- tokens, EM, F1 ------------------------------------------------------------ */

int squad_tokens(const char *s, char **buf, const char ***toks, size_t *n)
{
    *buf = NULL;
    *toks = NULL;
    *n = 0;
    char *norm = tf_squad_normalize_answer(s);
    if (!norm) return -1;
    size_t count = 0;
    for (char *p = norm; *p; p++)
        if (*p != ' ' && (p == norm || p[-1] == ' ')) count++;
    const char **tk = malloc((count + 1) * sizeof *tk); /* [count + 1] */
    if (!tk) {
        free(norm);
        return -1;
    }
    size_t k = 0;
    for (char *p = norm; *p; p++) {
        if (*p == ' ') {
            *p = '\0';
        } else if (p == norm || p[-1] == '\0') {
            tk[k++] = p;
        }
    }
    *buf = norm;
    *toks = tk;
    *n = k;
    return 0;
}

static int cmp_token(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

size_t squad_common_tokens(const char **a, size_t na, const char **b, size_t nb)
{
    qsort(a, na, sizeof *a, cmp_token);
    qsort(b, nb, sizeof *b, cmp_token);
    size_t i = 0, j = 0, same = 0;
    while (i < na && j < nb) {
        int c = strcmp(a[i], b[j]);
        if (c == 0) {
            same++;
            i++;
            j++;
        } else if (c < 0) {
            i++;
        } else {
            j++;
        }
    }
    return same;
}

double squad_f1_tokens(const char **gold, size_t ng, const char **pred, size_t np,
                       tf_squad_version version)
{
    /* v2's compute_f1: "if either is no-answer, F1 is 1 if they agree" */
    if (version == TF_SQUAD_V2 && (ng == 0 || np == 0)) return (ng == 0 && np == 0) ? 1.0 : 0.0;
    size_t same = squad_common_tokens(gold, ng, pred, np);
    if (same == 0) return 0.0;
    double precision = 1.0 * (double)same / (double)np;
    double recall = 1.0 * (double)same / (double)ng;
    return (2 * precision * recall) / (precision + recall);
}

int tf_squad_exact(const char *gold, const char *pred)
{
    char *a = tf_squad_normalize_answer(gold);
    char *b = tf_squad_normalize_answer(pred);
    int r = (a && b) ? strcmp(a, b) == 0 : -1;
    free(a);
    free(b);
    return r;
}

double tf_squad_f1(const char *gold, const char *pred, tf_squad_version version)
{
    char *gb, *pb;
    const char **gt, **pt;
    size_t ng, np;
    if (squad_tokens(gold, &gb, &gt, &ng) != 0) return -1;
    if (squad_tokens(pred, &pb, &pt, &np) != 0) {
        free(gb);
        free(gt);
        return -1;
    }
    double f1 = squad_f1_tokens(gt, ng, pt, np, version);
    free(gb);
    free(gt);
    free(pb);
    free(pt);
    return f1;
}

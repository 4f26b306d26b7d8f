/* tokenizer_unicode.c — UTF-8 decoding and the character classes, NFD and
 * lowercasing of Hugging Face's fast BERT tokenizer, on top of utf8proc.
 *
 * tokenizers 0.20.3 takes categories (control, Mn, punctuation) and NFD from
 * Rust crates with Unicode 8 data, and lowercases with Rust's
 * char::to_lowercase. utf8proc has newer data; tokenizer_unicode_tables.h
 * lists every code point where the two disagree (found by asking both about
 * all of Unicode, tests/ref/tokenizer_unicode_tables.py), and the classes
 * below apply those exceptions. Two findings worth knowing:
 *  - the cleaner drops Cc, Cf and Co but NOT unassigned code points (Cn);
 *  - U+0130 'İ' lowercases to "i" + U+0307 (two code points).
 */
#include <pthread.h>
#include <string.h>
#include <utf8proc.h>

#include "tfcore/log.h"
#include "tokenizer_internal.h"
#include "tokenizer_unicode_tables.h"

/* ASCII: control bytes are OTHER except \t \n \r (SPACE); 0x0B, 0x0C are
 * both (Cc, and Rust whitespace): the cleaner drops them before it maps
 * whitespace, so they only split words when cleaning is off. 0x7F is Cc. */
#define O TOKC_OTHER
#define S TOKC_SPACE
#define P TOKC_PUNCT
#define L TOKC_LOWER
const uint8_t tok_ascii_class[128] = {
    O, O, O, O, O, O, O, O, O, S, S, O | S, O | S, S, O, O, /* 00-0F */
    O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, /* 10-1F */
    S, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, /* 20-2F */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P, P, P, P, P, P, /* 30-3F */
    P, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, /* 40-4F */
    L, L, L, L, L, L, L, L, L, L, L, P, P, P, P, P, /* 50-5F */
    P, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 60-6F */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P, P, P, P, O, /* 70-7F */
};
#undef O
#undef S
#undef P
#undef L

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}
#define IN(table, cp) in_ranges(table, sizeof table / sizeof table[0], cp)

/* Rust's char::is_whitespace (Unicode White_Space), plus \t \n \r. */
static int is_rust_space(uint32_t cp)
{
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* The blocks BERT's tokenize_chinese_chars puts spaces around (as in
 * tokenizers' bert normalizer; 2B820-2B91F is not among them). */
static int is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static int lower_multi_index(uint32_t cp)
{
    for (size_t i = 0; i < sizeof tok_lower_multi / sizeof tok_lower_multi[0]; i++)
        if (tok_lower_multi[i][0] == cp) return (int)i;
    return -1;
}

static unsigned class_slow(uint32_t cp)
{
    if (cp > 0x10FFFF) return 0;
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    unsigned c = 0;
    int cat = p->category;
    if (cp == 0xFFFD) c |= TOKC_OTHER; /* dropped by the cleaner too */
    if (cp != 0x09 && cp != 0x0A && cp != 0x0D &&
        (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS) &&
        !IN(tok_other_keep, cp))
        c |= TOKC_OTHER;
    if (is_rust_space(cp)) c |= TOKC_SPACE;
    int punct = (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
                (cp >= 123 && cp <= 126) ||
                (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO);
    if (IN(tok_punct_flip, cp)) punct = !punct;
    if (punct) c |= TOKC_PUNCT;
    if (is_cjk(cp)) c |= TOKC_CJK;
    uint32_t d[4];
    int nd = tok_nfd(cp, d);
    int decomp = nd != 1 || d[0] != cp;
    if (decomp) c |= TOKC_DECOMP;
    if (!decomp) {
        /* Mn as tokenizers sees it (only asked of characters NFD keeps) */
        int mn = cat == UTF8PROC_CATEGORY_MN;
        if (IN(tok_mn_flip, cp)) mn = !mn;
        if (mn) c |= TOKC_MN;
    }
    if (tok_ccc(cp) != 0) c |= TOKC_MARK;
    uint32_t low[3];
    int nl = tok_lower(cp, low);
    if (nl != 1 || low[0] != cp) c |= TOKC_LOWER;
    return c;
}

/* Class bits of the BMP, computed once. */
static uint8_t bmp_class[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static void bmp_init(void)
{
    for (uint32_t cp = 0; cp < 0x10000; cp++) bmp_class[cp] = (uint8_t)class_slow(cp);
    if (strcmp(utf8proc_unicode_version(), TF_TOK_TABLES_UNICODE_VERSION) != 0)
        tf_warn("tokenizer: utf8proc has Unicode %s, its Hugging Face exception tables were made "
                "for %s; rare characters (added after Unicode 8) may tokenize differently",
                utf8proc_unicode_version(), TF_TOK_TABLES_UNICODE_VERSION);
}

unsigned tok_class(uint32_t cp)
{
    if (cp < 0x80) return tok_ascii_class[cp];
    if (cp < 0x10000) {
        pthread_once(&bmp_once, bmp_init);
        return bmp_class[cp];
    }
    return class_slow(cp);
}

int tok_nfd(uint32_t cp, uint32_t out[4])
{
    if (cp < 0xC0 || cp > 0x10FFFF || IN(tok_nfd_keep, cp)) {
        out[0] = cp;
        return 1;
    }
    utf8proc_int32_t buf[4];
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 4, UTF8PROC_DECOMPOSE,
                                                 &last);
    if (n < 1 || n > 4) { /* cannot happen for canonical decompositions */
        out[0] = cp;
        return 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; i++) out[i] = (uint32_t)buf[i];
    return (int)n;
}

int tok_ccc(uint32_t cp)
{
    if (cp < 0x300 || cp > 0x10FFFF) return 0;
    int c = utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
    if (c != 0 && IN(tok_ccc_zero, cp)) return 0;
    return c;
}

int tok_lower(uint32_t cp, uint32_t out[3])
{
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    int m = lower_multi_index(cp);
    if (m >= 0) {
        int n = 0;
        for (int i = 1; i < 4 && tok_lower_multi[m][i]; i++) out[n++] = tok_lower_multi[m][i];
        return n;
    }
    out[0] = cp > 0x10FFFF ? cp : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}

/* One step of UTF-8 decoding (Unicode table 3-7): the code point at s
 * (len > 0 bytes left) in *cp and the bytes it took. An ill-formed sequence
 * gives U+FFFD for its maximal subpart (the lead byte and the continuation
 * bytes that were still possible), the practice Python's decoder follows. */
static inline size_t utf8_step(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned char b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    uint32_t v;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        v = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        v = b & 0x0F;
        if (b == 0xE0) lo = 0xA0; /* no overlong forms */
        if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        v = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else { /* 80..C1, F5..FF never start a sequence */
        *cp = 0xFFFD;
        return 1;
    }
    size_t j = 1;
    for (int k = 0; k < need; k++, j++) {
        unsigned char l = k == 0 ? lo : 0x80, h = k == 0 ? hi : 0xBF;
        if (j >= len || s[j] < l || s[j] > h) {
            *cp = 0xFFFD;
            return j; /* the maximal subpart; the breaking byte starts the next step */
        }
        v = (v << 6) | (s[j] & 0x3F);
    }
    *cp = v;
    return j;
}

size_t tok_utf8_decode(const unsigned char *s, size_t len, uint32_t *out)
{
    size_t i = 0, n = 0;
    while (i < len) {
        if (s[i] < 0x80) { /* ASCII runs are the common case */
            out[n++] = s[i++];
            continue;
        }
        i += utf8_step(s + i, len - i, &out[n++]);
    }
    return n;
}

int tok_utf8_valid(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_step(u + i, len - i, &cp);
        /* U+FFFD written as EF BF BD is valid; a replacement is not */
        if (cp == 0xFFFD && !(k == 3 && u[i] == 0xEF && u[i + 1] == 0xBF && u[i + 2] == 0xBD)) return 0;
        i += k;
    }
    return 1;
}

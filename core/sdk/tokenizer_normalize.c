/* tokenizer_normalize.c — one text to WordPiece pieces: special tokens
 * written in the text, then Hugging Face's BertNormalizer (clean, CJK,
 * strip accents, lowercase) and BertPreTokenizer (whitespace, punctuation).
 *
 * The text is decoded to code points once (sc->cps). Normalization runs per
 * word (a run between whitespace/CJK characters): nothing in it crosses a
 * word boundary. Every normalized character remembers the index of the
 * original code point it came from (sc->norm_at), the way tokenizers'
 * NormalizedString aligns them, so that offsets of pieces map back.
 */
#include <string.h>

#include "tokenizer_internal.h"

static tf_status oom(tf_error *err)
{
    return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
}

/* Make room for need normalized characters. */
static int norm_reserve(struct tf_tok_scratch *sc, size_t need)
{
    if (need <= sc->norm_cap) return 0;
    size_t c = sc->norm_cap;
    if (tok_grow((void **)&sc->norm, &c, need, sizeof *sc->norm)) return -1;
    c = sc->norm_cap;
    if (tok_grow((void **)&sc->norm_at, &c, need, sizeof *sc->norm_at)) return -1;
    c = sc->norm_cap;
    if (tok_grow((void **)&sc->norm_new, &c, need, sizeof *sc->norm_new)) return -1;
    sc->norm_cap = c;
    return 0;
}

/* Stable counting sort of norm[i..j) (and norm_new with it) by canonical
 * combining class (1..254). */
static int sort_run(struct tf_tok_scratch *sc, int32_t i, int32_t j)
{
    size_t n = (size_t)(j - i), c1 = sc->tmp_cap, c2 = sc->tmp_cap;
    if (tok_grow((void **)&sc->tmp, &c1, n, sizeof *sc->tmp) ||
        tok_grow((void **)&sc->tmp_new, &c2, n, sizeof *sc->tmp_new))
        return -1;
    sc->tmp_cap = c1 < c2 ? c1 : c2;
    int32_t count[257] = {0}; /* [class + 1]: then where each class starts */
    for (int32_t k = i; k < j; k++) count[tok_ccc(sc->norm[k]) + 1]++;
    for (int c = 1; c < 257; c++) count[c] += count[c - 1];
    for (int32_t k = i; k < j; k++) {
        int32_t at = count[tok_ccc(sc->norm[k])]++;
        sc->tmp[at] = sc->norm[k];
        sc->tmp_new[at] = sc->norm_new[k];
    }
    memcpy(sc->norm + i, sc->tmp, n * sizeof *sc->tmp);
    memcpy(sc->norm_new + i, sc->tmp_new, n * sizeof *sc->tmp_new);
    return 0;
}

/* NFD of the current word as tokenizers does it: decompose every character
 * (the first code point of a decomposition "consumes" the source character,
 * the others are "inserted"), order each run of combining marks by
 * canonical class (stable), then give each output character the alignment
 * of the source character consumed last: tokenizers moves the consume /
 * insert flags along with the characters when it reorders, so after a
 * reordering the alignment follows the position, not the character. */
static int nfd_word(struct tf_tok_scratch *sc, int32_t rn, int32_t *nn)
{
    size_t need = (size_t)rn * 4; /* canonical decompositions are at most 4 long */
    if (norm_reserve(sc, need)) return -1;
    int32_t n = 0;
    int any_mark = 0;
    for (int32_t k = 0; k < rn; k++) {
        uint32_t c = sc->raw[k];
        unsigned cls = tok_class(c);
        if (cls & TOKC_DECOMP) {
            uint32_t d[4];
            int nd = tok_nfd(c, d);
            for (int j = 0; j < nd; j++) {
                sc->norm[n] = d[j];
                sc->norm_new[n] = j > 0;
                n++;
                if (tok_ccc(d[j])) any_mark = 1;
            }
        } else {
            sc->norm[n] = c;
            sc->norm_new[n] = 0;
            n++;
            if (cls & TOKC_MARK) any_mark = 1;
        }
    }
    if (any_mark) {
        /* canonical ordering: a stable sort by class inside each run of ccc != 0 */
        int32_t i = 0;
        while (i < n) {
            if (tok_ccc(sc->norm[i]) == 0) {
                i++;
                continue;
            }
            int32_t j = i;
            while (j < n && tok_ccc(sc->norm[j]) != 0) j++;
            if (j - i > 16) {
                /* long runs (only crafted text has them): counting sort, linear */
                if (sort_run(sc, i, j)) return -1;
                i = j;
                continue;
            }
            for (int32_t a = i + 1; a < j; a++) {
                uint32_t c = sc->norm[a];
                int8_t f = sc->norm_new[a];
                int cc = tok_ccc(c);
                int32_t b = a;
                while (b > i && tok_ccc(sc->norm[b - 1]) > cc) {
                    sc->norm[b] = sc->norm[b - 1];
                    sc->norm_new[b] = sc->norm_new[b - 1];
                    b--;
                }
                sc->norm[b] = c;
                sc->norm_new[b] = f;
            }
            i = j;
        }
    }
    int32_t consumed = 0, src = sc->raw_at[0];
    for (int32_t t = 0; t < n; t++) {
        if (!sc->norm_new[t]) src = sc->raw_at[consumed++];
        sc->norm_at[t] = src;
    }
    *nn = n;
    return 0;
}

/* Lowercase norm[0..*nn) in place; a character may become several (İ). */
static int lower_word(struct tf_tok_scratch *sc, int32_t *nn)
{
    int32_t n = *nn, m = 0;
    for (int32_t t = 0; t < n; t++) {
        uint32_t c = sc->norm[t];
        if (c < 0x80 || !(tok_class(c) & TOKC_LOWER)) {
            m++;
        } else {
            uint32_t low[3];
            m += tok_lower(c, low);
        }
    }
    if (m == n) {
        for (int32_t t = 0; t < n; t++) {
            uint32_t c = sc->norm[t];
            if (c < 0x80) {
                if (c >= 'A' && c <= 'Z') sc->norm[t] = c + 32;
            } else if (tok_class(c) & TOKC_LOWER) {
                uint32_t low[3];
                tok_lower(c, low);
                sc->norm[t] = low[0];
            }
        }
        return 0;
    }
    if (norm_reserve(sc, (size_t)m)) return -1;
    /* expand from the back: element t only moves right */
    int32_t w = m;
    for (int32_t t = n - 1; t >= 0; t--) {
        uint32_t c = sc->norm[t], low[3];
        int32_t at = sc->norm_at[t];
        int k = tok_lower(c, low);
        for (int j = k - 1; j >= 0; j--) {
            w--;
            sc->norm[w] = low[j];
            sc->norm_at[w] = at;
        }
    }
    *nn = m;
    return 0;
}

/* One piece (norm[a..b), no whitespace or punctuation inside, or a single
 * punctuation character) to WordPiece. */
static tf_status piece(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int32_t a, int32_t b,
                       tok_list *out, tf_error *err)
{
    if (b <= a) return TF_OK;
    int32_t n = b - a;
    if (tok_grow((void **)&sc->bytes, &sc->bytes_cap, (size_t)n * 4 + 8, 1) ||
        tok_grow((void **)&sc->boff, &sc->boff_cap, (size_t)n + 1, sizeof *sc->boff))
        return oom(err);
    int32_t off = 0;
    for (int32_t k = 0; k < n; k++) {
        sc->boff[k] = off;
        off += tok_utf8_put(sc->norm[a + k], sc->bytes + off);
    }
    sc->boff[n] = off;
    tf_status st = tok_wordpiece(tok, sc, a, n, out, err);
    sc->word_index++;
    return st;
}

/* The word in sc->raw: normalize, split on punctuation, WordPiece. */
static tf_status flush_word(const tf_tokenizer *tok, struct tf_tok_scratch *sc, tok_list *out,
                            tf_error *err)
{
    int32_t rn = sc->raw_n;
    if (rn == 0) return TF_OK;
    sc->raw_n = 0; /* the next word starts empty */
    int ascii = 1;
    for (int32_t k = 0; k < rn; k++)
        if (sc->raw[k] >= 0x80) {
            ascii = 0;
            break;
        }
    int32_t nn;
    if (ascii || !tok->opt.strip_accents) {
        /* ASCII has nothing to decompose and no Mn */
        if (norm_reserve(sc, (size_t)rn)) return oom(err);
        memcpy(sc->norm, sc->raw, (size_t)rn * sizeof *sc->norm);
        memcpy(sc->norm_at, sc->raw_at, (size_t)rn * sizeof *sc->norm_at);
        nn = rn;
    } else {
        if (nfd_word(sc, rn, &nn)) return oom(err);
        int32_t w = 0;
        for (int32_t t = 0; t < nn; t++) {
            uint32_t c = sc->norm[t];
            if (c >= 0x80 && (tok_class(c) & TOKC_MN)) continue;
            sc->norm[w] = c;
            sc->norm_at[w] = sc->norm_at[t];
            w++;
        }
        nn = w;
    }
    if (tok->opt.do_lower_case && lower_word(sc, &nn)) return oom(err);

    tf_status st;
    int32_t start = 0;
    for (int32_t t = 0; t < nn; t++) {
        uint32_t c = sc->norm[t];
        unsigned cls = c < 0x80 ? tok_ascii_class[c] : tok_class(c);
        if (cls & TOKC_PUNCT) {
            if ((st = piece(tok, sc, start, t, out, err)) || (st = piece(tok, sc, t, t + 1, out, err)))
                return st;
            start = t + 1;
        }
    }
    return piece(tok, sc, start, nn, out, err);
}

static inline int raw_push(struct tf_tok_scratch *sc, uint32_t c, int32_t at)
{
    if ((size_t)sc->raw_n >= sc->raw_cap) {
        size_t c1 = sc->raw_cap, c2 = sc->raw_cap;
        if (tok_grow((void **)&sc->raw, &c1, (size_t)sc->raw_n + 1, sizeof *sc->raw) ||
            tok_grow((void **)&sc->raw_at, &c2, (size_t)sc->raw_n + 1, sizeof *sc->raw_at))
            return -1;
        sc->raw_cap = c1 < c2 ? c1 : c2;
    }
    sc->raw[sc->raw_n] = c;
    sc->raw_at[sc->raw_n] = at;
    sc->raw_n++;
    return 0;
}

/* Text between special tokens: cps[s..e). */
static tf_status segment(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int32_t s, int32_t e,
                         tok_list *out, tf_error *err)
{
    const int clean = tok->opt.clean_text, cjk = tok->opt.tokenize_chinese_chars;
    const uint32_t *cps = sc->cps;
    tf_status st;
    sc->raw_n = 0;
    for (int32_t i = s; i < e; i++) {
        uint32_t c = cps[i];
        unsigned cls = c < 0x80 ? tok_ascii_class[c] : tok_class(c);
        if (cls) {
            if (clean && (cls & TOKC_OTHER)) continue; /* dropped: the word goes on */
            if (cls & TOKC_SPACE) {
                if ((st = flush_word(tok, sc, out, err))) return st;
                continue;
            }
            if (cjk && (cls & TOKC_CJK)) {
                if ((st = flush_word(tok, sc, out, err))) return st;
                if (raw_push(sc, c, i)) return oom(err);
                if ((st = flush_word(tok, sc, out, err))) return st;
                continue;
            }
        }
        if (raw_push(sc, c, i)) return oom(err);
    }
    return flush_word(tok, sc, out, err);
}

/* Length of the added token matching at cps[i..n), longest first; -1 none. */
static int match_added(const tf_tokenizer *tok, const uint32_t *cps, int32_t left, int32_t *len)
{
    for (int k = 0; k < tok->n_added; k++) {
        const tok_added *a = &tok->added[k];
        if (a->len <= left && memcmp(a->cps, cps, (size_t)a->len * sizeof *cps) == 0) {
            *len = a->len;
            return k;
        }
    }
    return -1;
}

tf_status tok_tokenize_sequence(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int which,
                                const char *text, size_t len, tf_error *err)
{
    tok_list *out = &sc->seq[which];
    out->n = 0;
    sc->word_index = 0;
    if (len > (size_t)INT32_MAX - 1)
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: text of %zu bytes (the limit is 2^31-2)", len);
    if (tok_grow((void **)&sc->cps, &sc->cps_cap, len + 1, sizeof *sc->cps)) return oom(err);
    int32_t n = (int32_t)tok_utf8_decode((const unsigned char *)text, len, sc->cps);
    /* a rough guess, so the list rarely grows while it fills */
    if (tok_list_reserve(out, n / 3 + 16)) return oom(err);
    const uint32_t *cps = sc->cps;
    int32_t seg = 0;
    tf_status st;
    if (tok->n_added > 0) {
        for (int32_t i = 0; i < n; i++) {
            uint32_t c = cps[i];
            int maybe = c < 0x80 ? (tok->added_first_ascii[c >> 3] >> (c & 7)) & 1 : tok->added_first_other;
            if (!maybe) continue;
            int32_t ml;
            int k = match_added(tok, cps + i, n - i, &ml);
            if (k < 0) continue;
            if (seg < i && (st = segment(tok, sc, seg, i, out, err))) return st;
            if (tok_list_reserve(out, out->n + 1)) return oom(err);
            out->id[out->n] = tok->added[k].id;
            out->start[out->n] = i;
            out->end[out->n] = i + ml;
            out->word[out->n] = sc->word_index++;
            out->n++;
            i += ml - 1;
            seg = i + 1;
        }
    }
    if (seg < n) return segment(tok, sc, seg, n, out, err);
    return TF_OK;
}

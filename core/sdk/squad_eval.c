/* squad_eval.c — the official SQuAD evaluation (evaluate-v1.1.py and
 * evaluate-v2.0.py), computed in the same order with the same double
 * arithmetic so the printed numbers are the same to the last digit.
 *
 * Sums run left to right in the scripts' dict order, as Python 3.11's sum()
 * adds floats (Python 3.12 switched sum() to compensated addition, which can
 * move the last printed digit; the official numbers come from plain adds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "squad_internal.h"
#include "tfcore/log.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* a*b+c must round twice, as Python does */
#endif

/* The normalized tokens of one text: in order (for EM) and sorted (for F1). */
typedef struct toks {
    char *buf;
    const char **tok;    /* [n] in order */
    const char **sorted; /* [n] */
    size_t n;
} toks;

static int toks_make(toks *t, const char *s)
{
    memset(t, 0, sizeof *t);
    if (squad_tokens(s, &t->buf, &t->tok, &t->n) != 0) return -1;
    t->sorted = malloc((t->n + 1) * sizeof *t->sorted); /* [n + 1] */
    if (!t->sorted) return -1;
    memcpy(t->sorted, t->tok, t->n * sizeof *t->tok);
    return 0;
}

static void toks_free(toks *t)
{
    free(t->buf);
    free(t->tok);
    free(t->sorted);
}

/* normalize_answer(a) == normalize_answer(b): the same token sequence */
static int toks_equal(const toks *a, const toks *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->tok[i], b->tok[i]) != 0) return 0;
    return 1;
}

/* Max EM and max F1 of pred over the example's golds. v2 drops golds that
 * normalize to "" and uses [""] when none is left; v1.1 takes them all. */
static int score_question(const tf_squad_example *e, const char *pred, tf_squad_version version,
                          double *em, double *f1)
{
    toks p;
    if (toks_make(&p, pred) != 0) {
        toks_free(&p);
        return -1;
    }
    double best_em = -1, best_f1 = -1;
    for (size_t a = 0; a < e->n_answers; a++) {
        toks g;
        if (toks_make(&g, e->answers[a].text) != 0) {
            toks_free(&g);
            toks_free(&p);
            return -1;
        }
        if (version == TF_SQUAD_V1 || g.n > 0) {
            double x = toks_equal(&g, &p);
            double y = squad_f1_tokens(g.sorted, g.n, p.sorted, p.n, version);
            if (x > best_em) best_em = x;
            if (y > best_f1) best_f1 = y;
        }
        toks_free(&g);
    }
    if (best_em < 0) { /* no gold answer left: the only right answer is "" */
        best_em = p.n == 0;
        best_f1 = p.n == 0;
    }
    toks_free(&p);
    *em = best_em;
    *f1 = best_f1;
    return 0;
}

static void add_float(tf_squad_result *r, const char *name, double v)
{
    tf_squad_metric *m = &r->metric[r->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->value = v;
}

static void add_int(tf_squad_result *r, const char *name, long long v)
{
    tf_squad_metric *m = &r->metric[r->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->is_integer = 1;
    m->ivalue = v;
    m->value = (double)v;
}

/* ---- v1.1 ------------------------------------------------------------------------ */

static tf_status evaluate_v1(const tf_squad_dataset *ds, const tf_squad_prediction *preds,
                             const squad_idmap *pmap, tf_squad_result *out, tf_error *err)
{
    double exact = 0, f1 = 0;
    size_t total = ds->n_examples;
    for (size_t i = 0; i < total; i++) {
        const tf_squad_example *e = &ds->examples[i];
        const size_t *pi = squad_idmap_get(pmap, e->id);
        if (!pi) {
            if (out->n_missing++ < SQUAD_WARN_MAX)
                tf_warn("Unanswered question %s will receive score 0.", e->id);
            continue;
        }
        if (e->n_answers == 0)
            return tf_error_set(err, TF_ERR_DATA,
                                "question '%s' has no gold answer: SQuAD v1.1 scoring needs one "
                                "(evaluate-v1.1.py stops there too)",
                                e->id);
        double em, f;
        if (score_question(e, preds[*pi].text, TF_SQUAD_V1, &em, &f) != 0)
            return tf_error_set(err, TF_ERR_RUNTIME, "squad evaluation: out of memory");
        exact += em;
        f1 += f;
    }
    if (out->n_missing > SQUAD_WARN_MAX)
        tf_warn("%zu questions in all have no prediction (the first %d listed above)",
                out->n_missing, SQUAD_WARN_MAX);
    out->n_questions = total;
    add_float(out, "exact_match", 100.0 * exact / (double)total);
    add_float(out, "f1", 100.0 * f1 / (double)total);
    return TF_OK;
}

/* ---- v2.0 ------------------------------------------------------------------------ */

typedef struct qrec {
    size_t ex;        /* the id's last occurrence in ds->examples */
    const char *pred; /* NULL: no prediction */
    int has_ans;      /* bool(qa['answers']) */
    double na;        /* no-answer probability */
    double em, f1;    /* raw scores */
} qrec;

typedef struct na_entry {
    double prob; /* the last value given for the id */
    size_t pos;  /* the id's first position: the dict order */
    size_t item; /* index of that last value in na[] */
} na_entry;

/* sorted(na_probs, key=lambda k: na_probs[k]): by value, stable */
static int cmp_na(const void *a, const void *b)
{
    const na_entry *x = a, *y = b;
    if (x->prob < y->prob) return -1;
    if (y->prob < x->prob) return 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* find_best_thresh(): sweep the threshold up through the sorted probabilities;
 * ent[n_ent] is sorted. */
static void best_thresh(const qrec *q, size_t nq, const squad_idmap *qmap,
                        const tf_squad_na_prob *na, const na_entry *ent, size_t n_ent,
                        size_t scored, int use_f1, tf_squad_result *out, const char *name,
                        const char *tname)
{
    double cur = 0; /* starts at num_no_ans (of the scored questions) */
    for (size_t u = 0; u < nq; u++)
        if (q[u].pred && !q[u].has_ans) cur += 1;
    double best = cur;
    const tf_squad_na_prob *thresh = NULL;
    for (size_t i = 0; i < n_ent; i++) {
        const tf_squad_na_prob *p = &na[ent[i].item];
        const size_t *u = squad_idmap_get(qmap, p->id);
        if (!u || !q[*u].pred) continue;
        const qrec *r = &q[*u];
        double diff = r->has_ans ? (use_f1 ? r->f1 : r->em) : (r->pred[0] ? -1.0 : 0.0);
        cur += diff;
        if (cur > best) {
            best = cur;
            thresh = p;
        }
    }
    add_float(out, name, 100.0 * best / (double)scored);
    if (thresh && thresh->is_integer)
        add_int(out, tname, thresh->iprob);
    else
        add_float(out, tname, thresh ? thresh->prob : 0.0);
}

static tf_status evaluate_v2(const tf_squad_dataset *ds, const tf_squad_prediction *preds,
                             const squad_idmap *pmap, const tf_squad_na_prob *na, size_t n_na,
                             double na_thresh, tf_squad_result *out, tf_error *err)
{
    tf_status s = TF_OK;
    squad_idmap qmap = {0}, nmap = {0};
    qrec *q = calloc(ds->n_examples, sizeof *q);          /* [distinct ids] */
    na_entry *ent = calloc(n_na ? n_na : 1, sizeof *ent); /* [distinct na ids] */
    if (!q || !ent || squad_idmap_init(&qmap, ds->n_examples) != 0 ||
        squad_idmap_init(&nmap, n_na) != 0)
        goto oom;

    /* qid_to_has_ans / get_raw_scores: a dict over ids, first position, last value */
    size_t nq = 0;
    for (size_t i = 0; i < ds->n_examples; i++) {
        int inserted;
        size_t *u = squad_idmap_put(&qmap, ds->examples[i].id, &inserted);
        if (!u) goto oom;
        if (inserted) *u = nq++;
        q[*u].ex = i;
    }
    size_t n_ent = 0;
    for (size_t i = 0; na && i < n_na; i++) {
        int inserted;
        size_t *k = squad_idmap_put(&nmap, na[i].id, &inserted);
        if (!k) goto oom;
        if (inserted) {
            *k = n_ent;
            ent[n_ent].pos = n_ent;
            n_ent++;
        }
        ent[*k].item = i;
        ent[*k].prob = na[i].prob;
    }

    size_t scored = 0;
    for (size_t u = 0; u < nq; u++) {
        qrec *r = &q[u];
        const tf_squad_example *e = &ds->examples[r->ex];
        r->has_ans = e->n_answers > 0;
        const size_t *pi = squad_idmap_get(pmap, e->id);
        if (!pi) {
            if (out->n_missing++ < SQUAD_WARN_MAX) tf_warn("Missing prediction for %s", e->id);
            continue;
        }
        r->pred = preds[*pi].text;
        if (na) {
            const size_t *k = squad_idmap_get(&nmap, e->id);
            if (!k) {
                s = tf_error_set(err, TF_ERR_DATA,
                                 "no no-answer probability for question '%s' (every predicted "
                                 "question needs one)",
                                 e->id);
                goto done;
            }
            r->na = na[ent[*k].item].prob;
        }
        if (score_question(e, r->pred, TF_SQUAD_V2, &r->em, &r->f1) != 0) goto oom;
        scored++;
    }
    if (out->n_missing > SQUAD_WARN_MAX)
        tf_warn("%zu questions in all have no prediction (the first %d listed above)",
                out->n_missing, SQUAD_WARN_MAX);
    out->n_questions = nq;
    if (scored == 0) {
        s = tf_error_set(err, TF_ERR_DATA, "no prediction for any of the %zu questions", nq);
        goto done;
    }

    /* apply_no_ans_threshold + make_eval_dict: all, HasAns, NoAns */
    for (int part = 0; part < 3; part++) {
        double em = 0, f1 = 0;
        size_t total = 0;
        for (size_t u = 0; u < nq; u++) {
            const qrec *r = &q[u];
            if (!r->pred || (part == 1 && !r->has_ans) || (part == 2 && r->has_ans)) continue;
            int pred_na = r->na > na_thresh;
            em += pred_na ? (double)!r->has_ans : r->em;
            f1 += pred_na ? (double)!r->has_ans : r->f1;
            total++;
        }
        if (total == 0) continue;
        static const char *names[3][3] = {{"exact", "f1", "total"},
                                          {"HasAns_exact", "HasAns_f1", "HasAns_total"},
                                          {"NoAns_exact", "NoAns_f1", "NoAns_total"}};
        add_float(out, names[part][0], 100.0 * em / (double)total);
        add_float(out, names[part][1], 100.0 * f1 / (double)total);
        add_int(out, names[part][2], (long long)total);
    }

    if (na) { /* find_all_best_thresh */
        qsort(ent, n_ent, sizeof *ent, cmp_na);
        best_thresh(q, nq, &qmap, na, ent, n_ent, scored, 0, out, "best_exact",
                    "best_exact_thresh");
        best_thresh(q, nq, &qmap, na, ent, n_ent, scored, 1, out, "best_f1", "best_f1_thresh");
    }
    goto done;
oom:
    s = tf_error_set(err, TF_ERR_RUNTIME, "squad evaluation: out of memory");
done:
    squad_idmap_free(&qmap);
    squad_idmap_free(&nmap);
    free(q);
    free(ent);
    return s;
}

tf_status tf_squad_evaluate(const tf_squad_dataset *ds, const tf_squad_prediction *preds,
                            size_t n_preds, const tf_squad_na_prob *na, size_t n_na,
                            const tf_squad_eval_options *opt, tf_squad_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    tf_squad_eval_options o = opt ? *opt : TF_SQUAD_EVAL_OPTIONS_DEFAULT;
    tf_squad_version version = o.version ? o.version : ds->version;
    if (version != TF_SQUAD_V1 && version != TF_SQUAD_V2)
        return tf_error_set(err, TF_ERR_USAGE, "squad evaluation: unknown version %d",
                            (int)version);
    if (ds->n_examples == 0)
        return tf_error_set(err, TF_ERR_DATA, "squad evaluation: no questions (empty dataset)");
    out->version = version;

    /* preds as a dict: a repeated id keeps its last text */
    squad_idmap pmap;
    if (squad_idmap_init(&pmap, n_preds) != 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad evaluation: out of memory");
    for (size_t i = 0; i < n_preds; i++) {
        int inserted;
        size_t *v = squad_idmap_put(&pmap, preds[i].id, &inserted);
        if (!v) {
            squad_idmap_free(&pmap);
            return tf_error_set(err, TF_ERR_RUNTIME, "squad evaluation: out of memory");
        }
        *v = i;
    }
    tf_status s = version == TF_SQUAD_V1
                      ? evaluate_v1(ds, preds, &pmap, out, err)
                      : evaluate_v2(ds, preds, &pmap, na, n_na, o.na_prob_thresh, out, err);
    squad_idmap_free(&pmap);
    if (s != TF_OK) {
        size_t nm = out->n_missing, nq = out->n_questions;
        memset(out, 0, sizeof *out);
        out->n_missing = nm;
        out->n_questions = nq;
    }
    return s;
}

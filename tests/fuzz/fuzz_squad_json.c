/* fuzz_squad_json.c — libFuzzer target for the SQuAD loader and evaluator
 * (tfcore/squad.h): any bytes as a SQuAD file; when they load, score the
 * dataset against predictions made from it, print the results, and check
 * invariants; the same bytes as text for normalize_answer / EM / F1, and the
 * first 8 as a double for the repr. Run: scripts/fuzz.sh 60 squad_json */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/log.h"
#include "tfcore/squad.h"

/* a broken invariant is a crash the fuzzer reports */
static void must(int ok)
{
    if (!ok) __builtin_trap();
}

static void score(const tf_squad_dataset *ds)
{
    size_t n = ds->n_examples;
    tf_squad_prediction *p = calloc(n, sizeof *p); /* [n] */
    tf_squad_na_prob *na = calloc(n, sizeof *na);  /* [n] */
    must(p && na);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const tf_squad_example *e = &ds->examples[i];
        must(strlen(e->context) == e->context_bytes && e->context_len <= e->context_bytes);
        for (size_t a = 0; a < e->n_answers; a++) {
            const tf_squad_answer *an = &e->answers[a];
            if (an->aligned)
                must(an->start_byte >= 0 && (size_t)an->start_byte <= e->context_bytes &&
                     memcmp(e->context + an->start_byte, an->text, strlen(an->text)) == 0);
            else
                must(an->start_byte == -1 && e->misaligned);
        }
        if (i % 5 == 4) continue; /* some questions without a prediction */
        p[k].id = e->id;
        p[k].text = e->n_answers ? e->answers[i % e->n_answers].text : (i % 2 ? e->question : "");
        na[k].id = e->id;
        na[k].prob = (double)(i % 7) / 7;
        na[k].is_integer = i % 7 == 0;
        k++;
    }
    tf_squad_eval_options o = TF_SQUAD_EVAL_OPTIONS_DEFAULT;
    for (int v = 1; v <= 2; v++) {
        o.version = (tf_squad_version)v;
        for (int with_na = 0; with_na < 2; with_na++) {
            tf_squad_result r;
            tf_error err;
            o.na_prob_thresh = with_na ? 0.5 : 1.0;
            if (tf_squad_evaluate(ds, p, k, with_na ? na : NULL, k, &o, &r, &err) != TF_OK)
                continue;
            char text[TF_SQUAD_JSON_MAX];
            for (int style = 0; style < 2; style++) {
                size_t len =
                    tf_squad_result_format(&r, (tf_squad_json_style)style, text, sizeof text);
                must(len < sizeof text && strlen(text) == len);
            }
            for (int m = 0; m < r.n; m++)
                if (!r.metric[m].is_integer && strstr(r.metric[m].name, "thresh") == NULL)
                    must(r.metric[m].value >= 0 && r.metric[m].value <= 100);
        }
    }
    free(p);
    free(na);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_log_set_level(TF_LOG_QUIET);
    tf_squad_dataset *ds;
    tf_error err;
    if (tf_squad_load_buffer((const char *)data, size, "fuzz.json", &ds, &err) == TF_OK) {
        score(ds);
        tf_squad_free(ds);
    } else {
        must(ds == NULL && err.msg[0] != '\0');
    }

    char *s = malloc(size + 1); /* the bytes as a C string */
    must(s);
    memcpy(s, data, size);
    s[size] = '\0';
    char *norm = tf_squad_normalize_answer(s);
    must(norm);
    char *again = tf_squad_normalize_answer(norm); /* normalizing is idempotent */
    must(again && strcmp(norm, again) == 0);
    free(again);
    free(norm);
    must(tf_squad_exact(s, s) == 1);
    must(tf_squad_f1(s, s, TF_SQUAD_V2) == 1.0);
    double f = tf_squad_f1(s, s + size / 2, TF_SQUAD_V1);
    must(f >= 0 && f <= 1);
    free(s);

    if (size >= 8) {
        double x;
        memcpy(&x, data, sizeof x);
        char buf[32];
        tf_squad_repr_double(x, buf);
        if (x == x && x - x == 0) must(strtod(buf, NULL) == x);
    }
    return 0;
}

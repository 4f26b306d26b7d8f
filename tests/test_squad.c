/* test_squad.c — SQuAD loading (tfcore/squad.h), the official evaluation's
 * rules and numbers, the JSON text, every loader/evaluator error, and the
 * `tfcore squad-eval` verb (run as a process: exit codes and output). The
 * expected outputs in tests/data/squad come from the official scripts' logic
 * (tests/ref/squad_eval_vs_hf.py re-checks them against transformers). */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfcore/log.h"
#include "tfcore/squad.h"

#define DATA TF_SRCDIR "/tests/data/squad"

static char tmpdir[256];

static void setup_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfcore-squad-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown_tmp(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Write text to tmpdir/name; returns the path (static buffer per call slot). */
static const char *tmp_file(const char *name, const char *text)
{
    static char paths[8][512];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static tf_status load_text(const char *json, tf_squad_dataset **ds, tf_error *err)
{
    return tf_squad_load_buffer(json, strlen(json), "t.json", ds, err);
}

/* ---- loading ------------------------------------------------------------------ */

START_TEST(load_v2_fields)
{
    tf_squad_dataset *ds;
    tf_error err = {0};
    ck_assert_int_eq(tf_squad_load(DATA "/mini-v2.0.json", &ds, &err), TF_OK);
    ck_assert_int_eq(ds->version, TF_SQUAD_V2);
    ck_assert_str_eq(ds->version_string, "v2.0");
    ck_assert_uint_eq(ds->n_examples, 12);
    ck_assert_uint_eq(ds->n_contexts, 3);
    ck_assert_uint_eq(ds->n_unanswerable, 4);
    ck_assert_uint_eq(ds->n_misaligned, 0);
    ck_assert_uint_eq(ds->n_duplicate_ids, 0);

    const tf_squad_example *e = &ds->examples[1]; /* u2: after Ö, ç, ü (2 bytes each) */
    ck_assert_str_eq(e->id, "u2");
    ck_assert_str_eq(e->title, "\xc3\x96l\xc3\xa7\xc3\xbc_and_\xce\xa3");
    ck_assert_str_eq(e->question, "Who sailed?");
    ck_assert_uint_eq(e->context_index, 0);
    ck_assert_uint_eq(e->context_len, 94);
    ck_assert_uint_eq(e->context_bytes, strlen(e->context));
    ck_assert_uint_gt(e->context_bytes, e->context_len);
    ck_assert_uint_eq(e->n_answers, 2);
    ck_assert_str_eq(e->answers[1].text,
                     "\xce\x9f\xce\x94\xce\xa5\xce\xa3\xce\xa3\xce\x95\xce\xa5\xce\xa3");
    ck_assert_int_eq(e->answers[1].start, 33);
    ck_assert_int_eq(e->answers[1].start_byte, 36); /* Ö ç ü are 2 bytes */
    ck_assert_int_eq(e->answers[1].aligned, 1);
    ck_assert_int_eq(memcmp(e->context + e->answers[1].start_byte, e->answers[1].text,
                            strlen(e->answers[1].text)),
                     0);
    ck_assert_int_eq(e->is_impossible, 0);
    ck_assert_int_eq(e->misaligned, 0);
    ck_assert_ptr_eq(ds->examples[0].context, e->context); /* one paragraph, one copy */

    const tf_squad_example *u4 = &ds->examples[3];
    ck_assert_str_eq(u4->id, "u4");
    ck_assert_int_eq(u4->is_impossible, 1);
    ck_assert_uint_eq(u4->n_answers, 0);
    ck_assert_ptr_null(u4->answers);
    ck_assert_uint_eq(ds->examples[4].context_index, 1);
    ck_assert_str_eq(ds->examples[9].title, "Punctuation");
    ck_assert_uint_eq(ds->examples[9].context_index, 2);
    tf_squad_free(ds);
    tf_squad_free(NULL);
}
END_TEST

START_TEST(load_v1_and_version_detection)
{
    tf_squad_dataset *ds;
    tf_error err = {0};
    ck_assert_int_eq(tf_squad_load(DATA "/mini-v1.1.json", &ds, &err), TF_OK);
    ck_assert_int_eq(ds->version, TF_SQUAD_V1);
    ck_assert_str_eq(ds->version_string, "1.1");
    ck_assert_uint_eq(ds->n_examples, 5);
    ck_assert_uint_eq(ds->n_unanswerable, 0);
    tf_squad_free(ds);

    /* no version, no is_impossible: v1.1; is_impossible anywhere: v2; "2.0": v2 */
    const char *q = "\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"1\", "
                    "\"question\": \"q\", \"answers\": [{\"text\": \"b\", \"answer_start\": 1}]";
    char buf[512];
    snprintf(buf, sizeof buf, "{\"data\": [{%s}]}]}]}", q);
    ck_assert_int_eq(load_text(buf, &ds, &err), TF_OK);
    ck_assert_int_eq(ds->version, TF_SQUAD_V1);
    ck_assert_str_eq(ds->version_string, "");
    ck_assert_str_eq(ds->examples[0].title, ""); /* title is optional */
    ck_assert_int_eq(ds->examples[0].answers[0].start_byte, 1);
    tf_squad_free(ds);
    snprintf(buf, sizeof buf, "{\"data\": [{%s, \"is_impossible\": false}]}]}]}", q);
    ck_assert_int_eq(load_text(buf, &ds, &err), TF_OK);
    ck_assert_int_eq(ds->version, TF_SQUAD_V2);
    tf_squad_free(ds);
    snprintf(buf, sizeof buf, "{\"version\": \"2.0\", \"data\": [{%s}]}]}]}", q);
    ck_assert_int_eq(load_text(buf, &ds, &err), TF_OK);
    ck_assert_int_eq(ds->version, TF_SQUAD_V2);
    tf_squad_free(ds);
}
END_TEST

START_TEST(load_misaligned_and_duplicates)
{
    /* é is 2 bytes: "café" at code point 0, "x" at 5; three bad answers */
    const char *json =
        "{\"version\": \"v2.0\", \"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": "
        "\"caf\\u00e9 x yz\", \"qas\": ["
        "{\"id\": \"ok\", \"question\": \"q\", \"answers\": [{\"text\": \"x\", \"answer_start\": "
        "5},"
        " {\"text\": \"yz\", \"answer_start\": 7}]},"
        "{\"id\": \"wrong\", \"question\": \"q\", \"answers\": [{\"text\": \"x\", "
        "\"answer_start\": 5},"
        " {\"text\": \"yz\", \"answer_start\": 6}]},"
        "{\"id\": \"past\", \"question\": \"q\", \"answers\": [{\"text\": \"yz\", "
        "\"answer_start\": 8}]},"
        "{\"id\": \"neg\", \"question\": \"q\", \"answers\": [{\"text\": \"c\", \"answer_start\": "
        "-1}]},"
        "{\"id\": \"ok\", \"question\": \"again\", \"answers\": []}"
        "]}]}]}";
    tf_squad_dataset *ds;
    tf_error err = {0};
    ck_assert_int_eq(load_text(json, &ds, &err), TF_OK);
    ck_assert_uint_eq(ds->n_examples, 5);
    ck_assert_uint_eq(ds->n_misaligned, 3);
    ck_assert_uint_eq(ds->n_duplicate_ids, 1);
    ck_assert_uint_eq(ds->n_unanswerable, 1);
    ck_assert_uint_eq(ds->examples[0].context_len, 9);
    ck_assert_int_eq(ds->examples[0].misaligned, 0);
    ck_assert_int_eq(ds->examples[0].answers[0].start_byte, 6);
    ck_assert_int_eq(ds->examples[0].answers[1].start_byte, 8);
    ck_assert_int_eq(ds->examples[1].misaligned, 1);
    ck_assert_int_eq(ds->examples[1].answers[0].aligned, 1);
    ck_assert_int_eq(ds->examples[1].answers[1].aligned, 0);
    ck_assert_int_eq(ds->examples[1].answers[1].start_byte, -1);
    ck_assert_int_eq(ds->examples[1].answers[1].start, 6);
    ck_assert_int_eq(ds->examples[2].misaligned, 1); /* runs past the end */
    ck_assert_int_eq(ds->examples[3].misaligned, 1); /* negative */
    tf_squad_free(ds);
}
END_TEST

START_TEST(load_many_warnings_and_large)
{
    /* 30 misaligned questions (warnings capped) and a 20,000-question file */
    size_t n = 20000, cap = n * 120 + 256, len = 0;
    char *buf = malloc(cap);
    len += (size_t)snprintf(buf + len, cap - len,
                            "{\"data\": [{\"paragraphs\": [{\"context\": \"one two\", \"qas\": [");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len,
                                "%s{\"id\": \"q%zu\", \"question\": \"?\", \"answers\": "
                                "[{\"text\": \"two\", \"answer_start\": %d}]}",
                                i ? "," : "", i, i < 30 ? 0 : 4);
    len += (size_t)snprintf(buf + len, cap - len, "]}]}]}");
    tf_squad_dataset *ds;
    tf_error err = {0};
    ck_assert_int_eq(tf_squad_load_buffer(buf, len, "big.json", &ds, &err), TF_OK);
    ck_assert_uint_eq(ds->n_examples, n);
    ck_assert_uint_eq(ds->n_misaligned, 30);
    ck_assert_str_eq(ds->examples[n - 1].id, "q19999");
    tf_squad_free(ds);
    free(buf);
}
END_TEST

START_TEST(load_errors)
{
    struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"data\": [\n  {\"paragraphs\": ]}", "t.json:2:18: unexpected token near ']'"},
        {"", "t.json:1:0: '[' or '{' expected near end of file"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"a\\u0000b\", \"qas\": []}]}]}",
         "t.json:1:"},
        {"[]", "t.json: top level is not an object"},
        {"{}", "t.json: missing 'data'"},
        {"{\"data\": {}}", "t.json: 'data' is not an array"},
        {"{\"version\": 2, \"data\": []}", "t.json: 'version' is not a string"},
        {"{\"data\": []}", "t.json: no questions (empty dataset)"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": []}]}]}",
         "t.json: no questions (empty dataset)"},
        {"{\"data\": [3]}", "t.json: data[0]: is not an object"},
        {"{\"data\": [{\"title\": 1, \"paragraphs\": []}]}",
         "t.json: data[0]: 'title' is not a string"},
        {"{\"data\": [{\"title\": \"t\"}]}", "t.json: data[0]: missing 'paragraphs'"},
        {"{\"data\": [{\"paragraphs\": {}}]}", "t.json: data[0]: 'paragraphs' is not an array"},
        {"{\"data\": [{\"paragraphs\": []}, {\"paragraphs\": [\"x\"]}]}",
         "t.json: data[1].paragraphs[0]: is not an object"},
        {"{\"data\": [{\"paragraphs\": [{\"qas\": []}]}]}",
         "t.json: data[0].paragraphs[0]: missing 'context'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": 1, \"qas\": []}]}]}",
         "t.json: data[0].paragraphs[0]: 'context' is not a string"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\"}]}]}",
         "t.json: data[0].paragraphs[0]: missing 'qas'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [null]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: is not an object"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"question\": \"q\", "
         "\"answers\": []}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: missing 'id'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": 7, \"question\": "
         "\"q\", \"answers\": []}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: 'id' is not a string"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"answers\": []}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: missing 'question'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\"}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: missing 'answers'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\", \"answers\": {}}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: 'answers' is not an array"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\", \"answers\": [], \"is_impossible\": 1}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0]: 'is_impossible' is not true or false"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\", \"answers\": [\"c\"]}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0].answers[0]: is not an object"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\", \"answers\": [{\"answer_start\": 0}]}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0].answers[0]: missing 'text'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\", \"answers\": [{\"text\": \"c\"}]}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0].answers[0]: missing 'answer_start'"},
        {"{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"1\", "
         "\"question\": \"q\", \"answers\": [{\"text\": \"c\", \"answer_start\": 0.0}]}]}]}]}",
         "t.json: data[0].paragraphs[0].qas[0].answers[0]: 'answer_start' is not an integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tf_squad_dataset *ds = (tf_squad_dataset *)1;
        tf_error err = {0};
        ck_assert_msg(load_text(cases[i].json, &ds, &err) == TF_ERR_DATA, "case %zu accepted", i);
        ck_assert_ptr_null(ds);
        ck_assert_int_eq(err.code, TF_ERR_DATA);
        ck_assert_msg(strstr(err.msg, cases[i].msg) == err.msg, "case %zu: got '%s', want '%s'", i,
                      err.msg, cases[i].msg);
    }
    tf_squad_dataset *ds;
    tf_error err = {0};
    ck_assert_int_eq(tf_squad_load("/nonexistent/dev.json", &ds, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "/nonexistent/dev.json: cannot open: No such file or directory");
    setup_tmp();
    const char *p = tmp_file("bad.json", "{\"data\":\n\n   [1,]}");
    ck_assert_int_eq(tf_squad_load(p, &ds, &err), TF_ERR_DATA);
    char want[600];
    snprintf(want, sizeof want, "%s:3:7: unexpected token near ']'", p);
    ck_assert_str_eq(err.msg, want);
    teardown_tmp();
}
END_TEST

/* ---- predictions and probabilities ----------------------------------------------------- */

START_TEST(load_predictions_and_na)
{
    setup_tmp();
    tf_squad_predictions p;
    tf_squad_na_probs na;
    tf_error err = {0};
    const char *f = tmp_file("p.json", "{\"b\": \"x\", \"a\": \"\", \"b\": \"y\"}");
    ck_assert_int_eq(tf_squad_load_predictions(f, &p, &err), TF_OK);
    ck_assert_uint_eq(p.n, 2); /* a repeated key: first position, last value */
    ck_assert_str_eq(p.items[0].id, "b");
    ck_assert_str_eq(p.items[0].text, "y");
    ck_assert_str_eq(p.items[1].text, "");
    tf_squad_predictions_free(&p);
    tf_squad_predictions_free(&p);

    f = tmp_file("n.json", "{\"a\": 0.25, \"b\": 1, \"c\": -3e-2}");
    ck_assert_int_eq(tf_squad_load_na_probs(f, &na, &err), TF_OK);
    ck_assert_uint_eq(na.n, 3);
    ck_assert(na.items[0].prob == 0.25 && !na.items[0].is_integer);
    ck_assert(na.items[1].prob == 1.0 && na.items[1].is_integer && na.items[1].iprob == 1);
    ck_assert(na.items[2].prob == -3e-2);
    tf_squad_na_probs_free(&na);

    f = tmp_file("e.json", "{}");
    ck_assert_int_eq(tf_squad_load_predictions(f, &p, &err), TF_OK);
    ck_assert_uint_eq(p.n, 0);
    tf_squad_predictions_free(&p);

    struct {
        int probs;
        const char *text, *msg;
    } cases[] = {
        {0, "[\"a\"]", "top level is not an object"},
        {0, "{\"a\": 1}", "'a': prediction is not a string"},
        {0, "{\"a\": \"x\",}", ":1:11: "},
        {1, "{\"a\": \"0.5\"}", "'a': no-answer probability is not a number"},
        {1, "{\"a\": null}", "'a': no-answer probability is not a number"},
        {1, "\"x\"", ":1:3: '[' or '{' expected"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        f = tmp_file("bad.json", cases[i].text);
        tf_status s = cases[i].probs ? tf_squad_load_na_probs(f, &na, &err)
                                     : tf_squad_load_predictions(f, &p, &err);
        ck_assert_msg(s == TF_ERR_DATA, "case %zu accepted", i);
        ck_assert_msg(strstr(err.msg, f) == err.msg && strstr(err.msg, cases[i].msg),
                      "case %zu: got '%s'", i, err.msg);
    }
    ck_assert_int_eq(tf_squad_load_predictions("/nonexistent.json", &p, &err), TF_ERR_DATA);
    ck_assert_int_eq(tf_squad_load_na_probs("/nonexistent.json", &na, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot open"));
    teardown_tmp();
}
END_TEST

/* ---- the rules ------------------------------------------------------------------------- */

static void expect_norm(const char *in, const char *want)
{
    char *got = tf_squad_normalize_answer(in);
    ck_assert_msg(got && strcmp(got, want) == 0, "normalize('%s') = '%s', want '%s'", in,
                  got ? got : "(null)", want);
    free(got);
}

START_TEST(normalize_rules)
{
    expect_norm("", "");
    expect_norm("The Cat", "cat");
    expect_norm("the theory of an ant, a bee", "theory of ant bee");
    expect_norm("A", "");
    expect_norm("  Hello,\tWORLD!  ", "hello world");
    expect_norm("U.S.A.", "usa");
    expect_norm("rock'n'roll", "rocknroll");
    expect_norm("x_the_y", "xthey");                     /* '_' is punctuation, removed first */
    expect_norm("“smart” — quotes", "“smart” — quotes"); /* not ASCII punctuation */
    expect_norm("a\xc2\xa0"
                "b\xe3\x80\x80"
                "c\xc2\x85"
                "d\x1c"
                "e",
                "b c d e");                          /* NBSP U+3000 U+0085 U+001C */
    expect_norm("x\xe2\x80\x8by", "x\xe2\x80\x8by"); /* U+200B is not whitespace */
    expect_norm("the\xcc\x81", "\xcc\x81");          /* a combining mark is not \w */
    expect_norm("\xc3\xa9the", "\xc3\xa9the");       /* é is \w: "éthe" is one word */
    expect_norm("2the", "2the");
    expect_norm("\xc3\x96L\xc3\x87\xc3\x9c", "\xc3\xb6l\xc3\xa7\xc3\xbc"); /* ÖLÇÜ -> ölçü */
    expect_norm("\xc4\xb0stanbul", "i\xcc\x87stanbul");                    /* İ -> i + U+0307 */
    /* final sigma: ΟΔΥΣΣΕΥΣ -> οδυσσευς; a lone Σ stays σ; "ΑΣ." is final */
    expect_norm("\xce\x9f\xce\x94\xce\xa5\xce\xa3\xce\xa3\xce\x95\xce\xa5\xce\xa3",
                "\xce\xbf\xce\xb4\xcf\x85\xcf\x83\xcf\x83\xce\xb5\xcf\x85\xcf\x82");
    expect_norm("\xce\xa3", "\xcf\x83");
    expect_norm("\xce\x91\xce\xa3.", "\xce\xb1\xcf\x82");
    expect_norm("\xce\x91\xce\xa3.\xce\x92",
                "\xce\xb1\xcf\x83\xce\xb2");                     /* '.' is case-ignorable */
    expect_norm("\xe2\x85\xa0\xce\xa3", "\xe2\x85\xb0\xcf\x82"); /* Ⅰ is cased */
    expect_norm("bad \xff byte", "bad \xef\xbf\xbd byte");       /* invalid -> U+FFFD */
}
END_TEST

START_TEST(em_f1_rules)
{
    ck_assert_int_eq(tf_squad_exact("The Cat!", "cat"), 1);
    ck_assert_int_eq(tf_squad_exact("cat", "cats"), 0);
    ck_assert_int_eq(tf_squad_exact("the", ""), 1);
    /* both without tokens: v2 says 1, v1.1 says 0 */
    ck_assert(tf_squad_f1("", "", TF_SQUAD_V2) == 1.0);
    ck_assert(tf_squad_f1("the", "a", TF_SQUAD_V2) == 1.0);
    ck_assert(tf_squad_f1("", "", TF_SQUAD_V1) == 0.0);
    ck_assert(tf_squad_f1("x", "", TF_SQUAD_V2) == 0.0);
    ck_assert(tf_squad_f1("", "x", TF_SQUAD_V2) == 0.0);
    /* multiset overlap: gold [a1 a1 b], pred [a1 b b c] -> 2 common; p=2/4 r=2/3 */
    double p = 2.0 / 4, r = 2.0 / 3;
    ck_assert(tf_squad_f1("x x y", "x y y z", TF_SQUAD_V2) == (2 * p * r) / (p + r));
    ck_assert(tf_squad_f1("x x y", "x y y z", TF_SQUAD_V1) == (2 * p * r) / (p + r));
    ck_assert(tf_squad_f1("x", "y", TF_SQUAD_V1) == 0.0);
    ck_assert(tf_squad_f1("The quick fox", "quick the fox", TF_SQUAD_V2) == 1.0);
}
END_TEST

START_TEST(repr_doubles)
{
    char b[32];
    struct {
        double x;
        const char *s;
    } cases[] = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {100.0, "100.0"},
        {50.0, "50.0"},
        {200.0 / 3, "66.66666666666667"},
        {100.0 / 3, "33.333333333333336"},
        {0.1, "0.1"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {1.5e300, "1.5e+300"},
        {1e-4, "0.0001"},
        {1e-5, "1e-05"},
        {1.25e-7, "1.25e-07"},
        {-2.5, "-2.5"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {123456.789, "123456.789"},
        {7.120236347223045e-307, "7.120236347223045e-307"}, /* power of two: the digit above */
        {9.5367431640625e-07, "9.5367431640625e-07"},
        {INFINITY, "Infinity"},
        {-INFINITY, "-Infinity"},
        {NAN, "NaN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(tf_squad_repr_double(cases[i].x, b), cases[i].s);
}
END_TEST

/* ---- evaluation -------------------------------------------------------------------------- */

typedef struct fixture {
    tf_squad_dataset *ds;
    tf_squad_predictions p;
    tf_squad_na_probs na;
} fixture;

static void fixture_load(fixture *f, const char *name, int with_na)
{
    char path[512];
    tf_error err = {0};
    snprintf(path, sizeof path, "%s/%s.json", DATA, name);
    ck_assert_int_eq(tf_squad_load(path, &f->ds, &err), TF_OK);
    snprintf(path, sizeof path, "%s/%s.pred.json", DATA, name);
    ck_assert_int_eq(tf_squad_load_predictions(path, &f->p, &err), TF_OK);
    memset(&f->na, 0, sizeof f->na);
    if (with_na) {
        snprintf(path, sizeof path, "%s/%s.na.json", DATA, name);
        ck_assert_int_eq(tf_squad_load_na_probs(path, &f->na, &err), TF_OK);
    }
}

static void fixture_free(fixture *f)
{
    tf_squad_free(f->ds);
    tf_squad_predictions_free(&f->p);
    tf_squad_na_probs_free(&f->na);
}

START_TEST(evaluate_v2_matches_official)
{
    fixture f;
    fixture_load(&f, "mini-v2.0", 1);
    tf_squad_result r;
    tf_error err = {0};
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, f.na.items, f.na.n, NULL, &r, &err),
                     TF_OK);
    ck_assert_int_eq(r.version, TF_SQUAD_V2);
    ck_assert_int_eq(r.n, 13);
    static const char *order[13] = {"exact",
                                    "f1",
                                    "total",
                                    "HasAns_exact",
                                    "HasAns_f1",
                                    "HasAns_total",
                                    "NoAns_exact",
                                    "NoAns_f1",
                                    "NoAns_total",
                                    "best_exact",
                                    "best_exact_thresh",
                                    "best_f1",
                                    "best_f1_thresh"};
    for (int i = 0; i < 13; i++)
        ck_assert_str_eq(r.metric[i].name, order[i]);
    ck_assert_uint_eq(r.n_questions, 12);
    ck_assert_uint_eq(r.n_missing, 0);
    ck_assert_int_eq(tf_squad_result_get(&r, "total")->ivalue, 12);
    ck_assert_ptr_null(tf_squad_result_get(&r, "exact_match"));

    char text[TF_SQUAD_JSON_MAX];
    char *want = read_all(DATA "/mini-v2.0.expected.txt");
    size_t n = tf_squad_result_format(&r, TF_SQUAD_JSON_INDENT2, text, sizeof text);
    ck_assert_uint_eq(n, strlen(text));
    strcat(text, "\n");
    ck_assert_str_eq(text, want);
    free(want);
    want = read_all(DATA "/mini-v2.0.expected-out.json");
    tf_squad_result_format(&r, TF_SQUAD_JSON_COMPACT, text, sizeof text);
    ck_assert_str_eq(text, want);
    /* snprintf semantics: the needed length even when cut */
    char small[10];
    ck_assert_uint_eq(tf_squad_result_format(&r, TF_SQUAD_JSON_COMPACT, small, sizeof small),
                      strlen(want));
    ck_assert_str_eq(small, "{\"exact\":");
    free(want);

    /* no na file, threshold 0.4: every prediction has probability 0.0 */
    tf_squad_eval_options o = TF_SQUAD_EVAL_OPTIONS_DEFAULT;
    o.na_prob_thresh = 0.4;
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, NULL, 0, &o, &r, &err), TF_OK);
    ck_assert_int_eq(r.n, 9);
    want = read_all(DATA "/mini-v2.0.expected-nona-t0.4.txt");
    tf_squad_result_format(&r, TF_SQUAD_JSON_INDENT2, text, sizeof text);
    strcat(text, "\n");
    ck_assert_str_eq(text, want);
    free(want);

    /* threshold below 0: every question predicted unanswerable */
    o.na_prob_thresh = -1;
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, NULL, 0, &o, &r, &err), TF_OK);
    ck_assert(tf_squad_result_get(&r, "HasAns_exact")->value == 0.0);
    ck_assert(tf_squad_result_get(&r, "NoAns_exact")->value == 100.0);
    ck_assert(tf_squad_result_get(&r, "exact")->value == 100.0 * 4 / 12);

    /* scoring v2 data as v1.1 fails on the unanswerable questions */
    o.version = TF_SQUAD_V1;
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, NULL, 0, &o, &r, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "question 'u4' has no gold answer: SQuAD v1.1 scoring needs one "
                              "(evaluate-v1.1.py stops there too)");
    o.version = (tf_squad_version)7;
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, NULL, 0, &o, &r, &err),
                     TF_ERR_USAGE);
    fixture_free(&f);
}
END_TEST

START_TEST(evaluate_v1_matches_official)
{
    fixture f;
    fixture_load(&f, "mini-v1.1", 0);
    tf_squad_result r;
    tf_error err = {0};
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, NULL, 0, NULL, &r, &err), TF_OK);
    ck_assert_int_eq(r.n, 2);
    ck_assert_str_eq(r.metric[0].name, "exact_match");
    ck_assert_str_eq(r.metric[1].name, "f1");
    ck_assert_uint_eq(r.n_missing, 1); /* counted as 0 */
    ck_assert_uint_eq(r.n_questions, 5);
    char text[TF_SQUAD_JSON_MAX];
    char *want = read_all(DATA "/mini-v1.1.expected.txt");
    tf_squad_result_format(&r, TF_SQUAD_JSON_COMPACT, text, sizeof text);
    strcat(text, "\n");
    ck_assert_str_eq(text, want);
    free(want);
    /* v1.1 data scored with the v2 rules */
    tf_squad_eval_options o = {1.0, TF_SQUAD_V2};
    ck_assert_int_eq(tf_squad_evaluate(f.ds, f.p.items, f.p.n, NULL, 0, &o, &r, &err), TF_OK);
    ck_assert_str_eq(r.metric[0].name, "exact");
    ck_assert_int_eq(tf_squad_result_get(&r, "total")->ivalue, 4); /* the predicted ones */
    ck_assert_ptr_null(tf_squad_result_get(&r, "NoAns_total"));
    fixture_free(&f);
}
END_TEST

static const char *dup_json =
    "{\"version\": \"v2.0\", \"data\": [{\"paragraphs\": [{\"context\": \"red blue\", \"qas\": ["
    "{\"id\": \"a\", \"question\": \"q\", \"answers\": [{\"text\": \"red\", \"answer_start\": 0}]},"
    "{\"id\": \"b\", \"question\": \"q\", \"answers\": []},"
    "{\"id\": \"c\", \"question\": \"q\", \"answers\": [{\"text\": \"blue\", \"answer_start\": "
    "4}]},"
    "{\"id\": \"a\", \"question\": \"q\", \"answers\": [{\"text\": \"blue\", \"answer_start\": 4}]}"
    "]}]}]}";

START_TEST(evaluate_v2_semantics)
{
    tf_squad_dataset *ds;
    tf_error err = {0};
    tf_squad_result r;
    ck_assert_int_eq(load_text(dup_json, &ds, &err), TF_OK);
    /* a repeated id counts once, with its last golds ("blue") */
    tf_squad_prediction p[] = {{"a", "blue"}, {"b", "x"}, {"c", "blue"}, {"b", ""}, {"zz", "y"}};
    ck_assert_int_eq(tf_squad_evaluate(ds, p, 5, NULL, 0, NULL, &r, &err), TF_OK);
    ck_assert_int_eq(tf_squad_result_get(&r, "total")->ivalue, 3);
    ck_assert(tf_squad_result_get(&r, "exact")->value == 100.0); /* b's last prediction is "" */
    ck_assert_uint_eq(r.n_questions, 3);

    /* a missing prediction: warned about, the rest scored */
    ck_assert_int_eq(tf_squad_evaluate(ds, p, 2, NULL, 0, NULL, &r, &err), TF_OK);
    ck_assert_uint_eq(r.n_missing, 1);
    ck_assert_int_eq(tf_squad_result_get(&r, "total")->ivalue, 2);
    ck_assert_int_eq(tf_squad_result_get(&r, "HasAns_total")->ivalue, 1);
    ck_assert(tf_squad_result_get(&r, "exact")->value == 50.0);

    /* no prediction at all */
    ck_assert_int_eq(tf_squad_evaluate(ds, p + 4, 1, NULL, 0, NULL, &r, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "no prediction for any of the 3 questions");
    ck_assert_uint_eq(r.n_missing, 3);

    /* na probabilities: one missing for a predicted question */
    tf_squad_na_prob na[] = {{"a", 0.5, 0, 0}, {"c", 0.5, 0, 0}};
    ck_assert_int_eq(tf_squad_evaluate(ds, p, 3, na, 2, NULL, &r, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "no no-answer probability for question 'b' (every predicted "
                              "question needs one)");

    /* best threshold: ties keep the dict order, so the order changes the sweep */
    tf_squad_prediction q[] = {{"a", "red"}, {"b", "x"}, {"c", "blue"}};
    /* scores: a 0 (gold is "blue" now), b has no answer but a prediction: -1, c 1 */
    tf_squad_na_prob n1[] = {{"c", 0.3, 0, 0}, {"b", 0.3, 0, 0}, {"a", 0.9, 0, 0}};
    ck_assert_int_eq(tf_squad_evaluate(ds, q, 3, n1, 3, NULL, &r, &err), TF_OK);
    /* num_no_ans 1 -> c: 2 (best, 0.3) -> b: 1 -> a: 1 */
    ck_assert(tf_squad_result_get(&r, "best_exact")->value == 100.0 * 2 / 3);
    ck_assert(tf_squad_result_get(&r, "best_exact_thresh")->value == 0.3);
    tf_squad_na_prob n2[] = {
        {"b", 0.3, 0, 0}, {"c", 0.3, 0, 0}, {"a", 0.9, 0, 0}, {"b", 0.3, 0, 0}};
    ck_assert_int_eq(tf_squad_evaluate(ds, q, 3, n2, 4, NULL, &r, &err), TF_OK);
    /* 1 -> b: 0 -> c: 1 (not above 1) -> a: 1: the best stays 1 at 0.0 */
    ck_assert(tf_squad_result_get(&r, "best_exact")->value == 100.0 / 3);
    ck_assert(tf_squad_result_get(&r, "best_exact_thresh")->value == 0.0);
    ck_assert_int_eq(tf_squad_result_get(&r, "best_exact_thresh")->is_integer, 0);
    /* an integer probability prints as an integer */
    tf_squad_na_prob n3[] = {{"c", 0, 1, 0}, {"b", 1, 1, 1}, {"a", 1, 1, 1}};
    ck_assert_int_eq(tf_squad_evaluate(ds, q, 3, n3, 3, NULL, &r, &err), TF_OK);
    const tf_squad_metric *t = tf_squad_result_get(&r, "best_f1_thresh");
    ck_assert_int_eq(t->is_integer, 1);
    ck_assert_int_eq(t->ivalue, 0);
    char text[TF_SQUAD_JSON_MAX];
    tf_squad_result_format(&r, TF_SQUAD_JSON_COMPACT, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, "\"best_f1_thresh\": 0}"));
    tf_squad_free(ds);

    /* an empty dataset cannot be evaluated */
    tf_squad_dataset empty = {0};
    empty.version = TF_SQUAD_V2;
    ck_assert_int_eq(tf_squad_evaluate(&empty, q, 3, NULL, 0, NULL, &r, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "squad evaluation: no questions (empty dataset)");
}
END_TEST

START_TEST(evaluate_v1_semantics)
{
    const char *json =
        "{\"version\": \"1.1\", \"data\": [{\"paragraphs\": [{\"context\": \"red blue\", \"qas\": ["
        "{\"id\": \"a\", \"question\": \"q\", \"answers\": [{\"text\": \"red\", \"answer_start\": "
        "0}]},"
        "{\"id\": \"a\", \"question\": \"q\", \"answers\": [{\"text\": \"blue\", \"answer_start\": "
        "4}]},"
        "{\"id\": \"e\", \"question\": \"q\", \"answers\": [{\"text\": \"the\", \"answer_start\": "
        "0}]}"
        "]}]}]}";
    tf_squad_dataset *ds;
    tf_error err = {0};
    tf_squad_result r;
    ck_assert_int_eq(load_text(json, &ds, &err), TF_OK);
    ck_assert_uint_eq(ds->n_misaligned, 1);
    /* every occurrence counts; gold "the" and pred "" : EM 1, F1 0 (v1.1) */
    tf_squad_prediction p[] = {{"a", "red"}, {"e", ""}};
    ck_assert_int_eq(tf_squad_evaluate(ds, p, 2, NULL, 0, NULL, &r, &err), TF_OK);
    ck_assert(tf_squad_result_get(&r, "exact_match")->value == 100.0 * 2 / 3);
    ck_assert(tf_squad_result_get(&r, "f1")->value == 100.0 * 1 / 3);
    /* all missing: zeros, not an error */
    ck_assert_int_eq(tf_squad_evaluate(ds, p, 0, NULL, 0, NULL, &r, &err), TF_OK);
    ck_assert_uint_eq(r.n_missing, 3);
    ck_assert(tf_squad_result_get(&r, "f1")->value == 0.0);
    char text[TF_SQUAD_JSON_MAX];
    tf_squad_result_format(&r, TF_SQUAD_JSON_COMPACT, text, sizeof text);
    ck_assert_str_eq(text, "{\"exact_match\": 0.0, \"f1\": 0.0}");
    tf_squad_free(ds);

    tf_squad_result none = {0};
    ck_assert_uint_eq(tf_squad_result_format(&none, TF_SQUAD_JSON_INDENT2, text, sizeof text), 2);
    ck_assert_str_eq(text, "{}");
}
END_TEST

/* ---- the verb ------------------------------------------------------------------------------ */

/* Run `tfcore squad-eval ARGS...`; stdout/stderr into tmpdir/stdout, /stderr. */
static int run_verb(const char *const *args)
{
    char out[300], errp[300];
    snprintf(out, sizeof out, "%s/stdout", tmpdir);
    snprintf(errp, sizeof errp, "%s/stderr", tmpdir);
    const char *argv[16] = {TF_BUILDDIR "/core/tfcore", "squad-eval"};
    int n = 2;
    for (; args[n - 2]; n++)
        argv[n] = args[n - 2];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static char *tmp_read(const char *name)
{
    char p[300];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return read_all(p);
}

START_TEST(verb_outputs)
{
    setup_tmp();
    const char *help[] = {"--help", NULL};
    int rc = run_verb(help);
    char *err = tmp_read("stderr");
    ck_assert_msg(rc == 0,
                  "tfcore squad-eval --help: exit %d: %s (is squad-eval wired into "
                  "core/cli/cli_main.c?)",
                  rc, err);
    free(err);
    char *s = tmp_read("stdout");
    ck_assert_ptr_nonnull(strstr(s, "usage: tfcore squad-eval DATA.json PREDICTIONS.json"));
    free(s);

    const char *v2[] = {DATA "/mini-v2.0.json", DATA "/mini-v2.0.pred.json", "--na-prob",
                        DATA "/mini-v2.0.na.json", NULL};
    ck_assert_int_eq(run_verb(v2), 0);
    s = tmp_read("stdout");
    char *want = read_all(DATA "/mini-v2.0.expected.txt");
    ck_assert_str_eq(s, want);
    free(s);
    free(want);

    char outp[300];
    snprintf(outp, sizeof outp, "%s/eval.json", tmpdir);
    char outopt[320];
    snprintf(outopt, sizeof outopt, "--out=%s", outp);
    const char *v2out[] = {DATA "/mini-v2.0.json", "--na-prob=" DATA "/mini-v2.0.na.json",
                           DATA "/mini-v2.0.pred.json", outopt, NULL};
    ck_assert_int_eq(run_verb(v2out), 0);
    s = tmp_read("stdout");
    ck_assert_str_eq(s, "");
    free(s);
    s = read_all(outp);
    want = read_all(DATA "/mini-v2.0.expected-out.json");
    ck_assert_str_eq(s, want);
    free(s);
    free(want);

    const char *thresh[] = {DATA "/mini-v2.0.json", DATA "/mini-v2.0.pred.json", "--na-prob-thresh",
                            "0.4", NULL};
    ck_assert_int_eq(run_verb(thresh), 0);
    s = tmp_read("stdout");
    want = read_all(DATA "/mini-v2.0.expected-nona-t0.4.txt");
    ck_assert_str_eq(s, want);
    free(s);
    free(want);

    const char *v1[] = {"--", DATA "/mini-v1.1.json", DATA "/mini-v1.1.pred.json", NULL};
    ck_assert_int_eq(run_verb(v1), 0);
    s = tmp_read("stdout");
    want = read_all(DATA "/mini-v1.1.expected.txt");
    ck_assert_str_eq(s, want);
    free(s);
    free(want);
    s = tmp_read("stderr");
    ck_assert_ptr_nonnull(strstr(s, "Unanswered question n4 will receive score 0."));
    free(s);

    const char *v1na[] = {DATA "/mini-v1.1.json", DATA "/mini-v1.1.pred.json", "--na-prob",
                          DATA "/mini-v2.0.na.json", NULL};
    ck_assert_int_eq(run_verb(v1na), 0);
    s = tmp_read("stderr");
    ck_assert_ptr_nonnull(strstr(s, "apply to v2.0 only and are ignored"));
    free(s);
    teardown_tmp();
}
END_TEST

START_TEST(verb_errors)
{
    setup_tmp();
    const char *d = DATA "/mini-v2.0.json", *p = DATA "/mini-v2.0.pred.json";
    const char *bad_pred = tmp_file("badpred.json", "{\"u1\": 3}");
    const char *no_match = tmp_file("nomatch.json", "{\"nope\": \"x\"}");
    const char *bad_data = tmp_file("baddata.json", "{\"data\": [}");
    const char *short_na = tmp_file("shortna.json", "{\"u1\": 0.5}");
    char outp[300];
    snprintf(outp, sizeof outp, "%s/no/such/dir/out.json", tmpdir);
    struct {
        const char *args[8];
        int rc;
        const char *msg;
    } cases[] = {
        {{NULL}, 2, "tfcore squad-eval: needs DATA.json and PREDICTIONS.json (0 given)"},
        {{d, NULL}, 2, "needs DATA.json and PREDICTIONS.json (1 given)"},
        {{d, p, "third", NULL}, 2, "unexpected argument 'third'"},
        {{d, p, "--bogus", NULL}, 2, "unknown option '--bogus'"},
        {{d, p, "--na-probx", "f", NULL}, 2, "unknown option '--na-probx'"},
        {{d, p, "--na-prob", NULL}, 2, "--na-prob needs a value"},
        {{d, p, "--na-prob-thresh", NULL}, 2, "--na-prob-thresh needs a value"},
        {{d, p, "--out", NULL}, 2, "--out needs a value"},
        {{d, p, "--na-prob-thresh", "abc", NULL}, 2, "--na-prob-thresh: 'abc' is not a number"},
        {{d, p, "--na-prob-thresh=1.5x", NULL}, 2, "'1.5x' is not a number"},
        {{"/nonexistent.json", p, NULL}, 5, "tfcore: /nonexistent.json: cannot open"},
        {{bad_data, p, NULL}, 5, ":1:11: unexpected token near '}'"},
        {{d, bad_pred, NULL}, 5, "'u1': prediction is not a string"},
        {{d, p, "--na-prob", "/nonexistent-na.json", NULL}, 5, "/nonexistent-na.json: cannot open"},
        {{d, no_match, NULL}, 5, "tfcore: no prediction for any of the 12 questions"},
        {{d, p, "--na-prob", short_na, NULL}, 5, "no no-answer probability for question 'u2'"},
        {{d, p, "--out", outp, NULL}, 1, "cannot write"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run_verb(cases[i].args);
        char *e = tmp_read("stderr");
        ck_assert_msg(rc == cases[i].rc, "case %zu: exit %d, want %d (%s)", i, rc, cases[i].rc, e);
        ck_assert_msg(strstr(e, cases[i].msg) != NULL, "case %zu: stderr '%s', want '%s'", i, e,
                      cases[i].msg);
        free(e);
    }
    teardown_tmp();
}
END_TEST

static Suite *squad_suite(void)
{
    Suite *s = suite_create("squad");
    TCase *t = tcase_create("load");
    tcase_add_test(t, load_v2_fields);
    tcase_add_test(t, load_v1_and_version_detection);
    tcase_add_test(t, load_misaligned_and_duplicates);
    tcase_add_test(t, load_many_warnings_and_large);
    tcase_add_test(t, load_errors);
    tcase_add_test(t, load_predictions_and_na);
    suite_add_tcase(s, t);
    t = tcase_create("rules");
    tcase_add_test(t, normalize_rules);
    tcase_add_test(t, em_f1_rules);
    tcase_add_test(t, repr_doubles);
    suite_add_tcase(s, t);
    t = tcase_create("evaluate");
    tcase_add_test(t, evaluate_v2_matches_official);
    tcase_add_test(t, evaluate_v1_matches_official);
    tcase_add_test(t, evaluate_v2_semantics);
    tcase_add_test(t, evaluate_v1_semantics);
    suite_add_tcase(s, t);
    t = tcase_create("verb");
    tcase_add_test(t, verb_outputs);
    tcase_add_test(t, verb_errors);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    tf_log_set_level(TF_LOG_ERROR); /* the loader's warnings are expected here */
    SRunner *r = srunner_create(squad_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* test_data_synthetic.c — the "synthetic" dataset plugin (plugins/data-synthetic),
 * compiled in: per-row lengths (min_length), right padding with attention
 * mask 0, padding = "longest", row_length, question-answering spans inside a
 * short row, and the config errors of the new keys. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/config.h"
#include "tfcore/dataset.h"
#include "tfcore/log.h"

#include "synthetic.c" /* the plugin's vtable is static */

static const tf_dataset_vtable *vt = &synthetic_vtable;

typedef struct opened {
    tf_config *cfg;
    tf_dataset *ds;
} opened;

static tf_status open_body(const char *body, tf_task task, opened *o, tf_error *err)
{
    char text[1024];
    snprintf(text, sizeof text, "data = { %s };", body);
    o->ds = NULL;
    ck_assert_int_eq(tf_config_load_string(&o->cfg, text, "test.cfg", NULL, err), TF_OK);
    tf_section *sec = tf_config_section(o->cfg, "data");
    tf_status st = vt->check_config(sec, err);
    if (st) return st;
    tf_dataset_open_args a = {sizeof a, sec, task, 2, NULL, -1, 512, 30522, 1, NULL, 1};
    return vt->open(&a, &o->ds, err);
}

static opened open_ok(const char *body, tf_task task)
{
    opened o;
    tf_error err = {0};
    tf_status st = open_body(body, task, &o, &err);
    ck_assert_msg(st == TF_OK, "open: %s", err.msg);
    return o;
}

static void close_o(opened *o)
{
    vt->close(o->ds);
    tf_config_free(o->cfg);
}

enum { CAP_ROWS = 8, CAP_SEQ = 64 };
typedef struct batch_bufs {
    int32_t ids[CAP_ROWS * CAP_SEQ], types[CAP_ROWS * CAP_SEQ], mask[CAP_ROWS * CAP_SEQ];
    int32_t labels[CAP_ROWS], sp[CAP_ROWS], ep[CAP_ROWS];
    tf_batch b;
} batch_bufs;

static void bufs_init(batch_bufs *u)
{
    memset(u, 0, sizeof *u);
    u->b = (tf_batch){0, 0, CAP_ROWS, CAP_SEQ, u->ids, u->types, u->mask, u->labels, u->sp, u->ep, NULL};
}

START_TEST(lengths_uniform_and_deterministic)
{
    opened o = open_ok("seq_len = 64; min_length = 16; num_examples = 4000; seed = 3;", TF_TASK_CLASSIFICATION);
    opened p = open_ok("seq_len = 64; min_length = 16; num_examples = 4000; seed = 3;", TF_TASK_CLASSIFICATION);
    opened q = open_ok("seq_len = 64; min_length = 16; num_examples = 4000; seed = 4;", TF_TASK_CLASSIFICATION);
    int lo = 1 << 30, hi = 0, differ = 0;
    double sum = 0;
    int count[65] = {0};
    for (size_t r = 0; r < 4000; r++) {
        int len = vt->row_length(o.ds, TF_SPLIT_TRAIN, r);
        ck_assert_int_eq(len, vt->row_length(p.ds, TF_SPLIT_TRAIN, r));
        differ += len != vt->row_length(q.ds, TF_SPLIT_TRAIN, r);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
        sum += len;
        count[len]++;
    }
    ck_assert_int_eq(lo, 16);
    ck_assert_int_eq(hi, 64);
    ck_assert_msg(sum / 4000 > 38 && sum / 4000 < 42, "mean length %g, want about 40", sum / 4000);
    for (int l = 16; l <= 64; l++) ck_assert_msg(count[l] > 40, "length %d drawn %d times of 4000", l, count[l]);
    ck_assert_int_gt(differ, 3000); /* another seed, other lengths */
    /* without min_length every row is full */
    opened f = open_ok("seq_len = 64;", TF_TASK_CLASSIFICATION);
    for (size_t r = 0; r < 100; r++) ck_assert_int_eq(vt->row_length(f.ds, TF_SPLIT_EVAL, r), 64);
    close_o(&o);
    close_o(&p);
    close_o(&q);
    close_o(&f);
}
END_TEST

/* A row of length T: [CLS] ... [SEP] then id 0, type 0, mask 0 up to the batch width. */
static void check_row(const tf_batch *b, int i, int T)
{
    const int32_t *ids = b->input_ids + (size_t)i * b->seq, *m = b->attention_mask + (size_t)i * b->seq;
    const int32_t *ty = b->token_type_ids + (size_t)i * b->seq;
    ck_assert_int_eq(ids[0], ID_CLS);
    ck_assert_int_eq(ids[T - 1], ID_SEP);
    for (int j = 0; j < b->seq; j++) {
        ck_assert_int_eq(m[j], j < T);
        if (j >= T) ck_assert_int_eq(ids[j], 0);
        if (j >= T) ck_assert_int_eq(ty[j], 0);
        if (j > 0 && j < T - 1) ck_assert_int_ge(ids[j], ID_LOW);
    }
}

START_TEST(padding_max_length_and_longest)
{
    opened o = open_ok("seq_len = 64; min_length = 16; num_examples = 100;", TF_TASK_CLASSIFICATION);
    opened g = open_ok("seq_len = 64; min_length = 16; num_examples = 100; padding = \"longest\";",
                       TF_TASK_CLASSIFICATION);
    batch_bufs u, v;
    bufs_init(&u);
    bufs_init(&v);
    size_t idx[5] = {7, 3, 99, 0, 42};
    tf_error err = {0};
    ck_assert_int_eq(vt->fill_batch(o.ds, TF_SPLIT_TRAIN, idx, 5, &u.b, &err), TF_OK);
    ck_assert_int_eq(vt->fill_batch(g.ds, TF_SPLIT_TRAIN, idx, 5, &v.b, &err), TF_OK);
    ck_assert_int_eq(u.b.seq, 64);
    int longest = 0;
    for (int i = 0; i < 5; i++) {
        int T = vt->row_length(o.ds, TF_SPLIT_TRAIN, idx[i]);
        longest = T > longest ? T : longest;
    }
    ck_assert_int_lt(longest, 64); /* this seed's rows: the batch is narrower than seq_len */
    ck_assert_int_eq(v.b.seq, longest);
    for (int i = 0; i < 5; i++) {
        int T = vt->row_length(o.ds, TF_SPLIT_TRAIN, idx[i]);
        check_row(&u.b, i, T);
        check_row(&v.b, i, T);
        /* the same tokens and label either way */
        ck_assert_int_eq(memcmp(u.b.input_ids + i * 64, v.b.input_ids + i * longest, (size_t)T * 4), 0);
        ck_assert_int_eq(u.labels[i], v.labels[i]);
    }
    close_o(&o);
    close_o(&g);
}
END_TEST

/* A row that comes out full length has the tokens of a config without min_length. */
START_TEST(full_rows_unchanged)
{
    opened o = open_ok("seq_len = 32; min_length = 30; num_examples = 100;", TF_TASK_CLASSIFICATION);
    opened f = open_ok("seq_len = 32; num_examples = 100;", TF_TASK_CLASSIFICATION);
    batch_bufs u, v;
    bufs_init(&u);
    bufs_init(&v);
    tf_error err = {0};
    int full = 0;
    for (size_t r = 0; r < 100; r++) {
        if (vt->row_length(o.ds, TF_SPLIT_TRAIN, r) != 32) continue;
        full++;
        ck_assert_int_eq(vt->fill_batch(o.ds, TF_SPLIT_TRAIN, &r, 1, &u.b, &err), TF_OK);
        ck_assert_int_eq(vt->fill_batch(f.ds, TF_SPLIT_TRAIN, &r, 1, &v.b, &err), TF_OK);
        ck_assert_int_eq(memcmp(u.ids, v.ids, 32 * 4), 0);
        ck_assert_int_eq(u.labels[0], v.labels[0]);
    }
    ck_assert_int_gt(full, 10);
    close_o(&o);
    close_o(&f);
}
END_TEST

START_TEST(question_answering_short_rows)
{
    opened o = open_ok("task = \"question-answering\"; seq_len = 64; min_length = 15; num_examples = 200;"
                       " eval_examples = 200; padding = \"longest\";",
                       TF_TASK_QUESTION_ANSWERING);
    batch_bufs u;
    bufs_init(&u);
    tf_error err = {0};
    for (size_t r = 0; r < 200; r++) {
        ck_assert_int_eq(vt->fill_batch(o.ds, TF_SPLIT_TRAIN, &r, 1, &u.b, &err), TF_OK);
        int T = vt->row_length(o.ds, TF_SPLIT_TRAIN, r);
        ck_assert_int_eq(u.b.seq, T);
        ck_assert_int_eq(u.ids[QUESTION_LEN + 1], ID_SEP);
        ck_assert_int_eq(u.ids[T - 1], ID_SEP);
        ck_assert_int_gt(u.sp[0], QUESTION_LEN + 2); /* inside the context, after its marker */
        ck_assert_int_le(u.sp[0], u.ep[0]);
        ck_assert_int_lt(u.ep[0], T - 2); /* room for the closing marker before [SEP] */
        ck_assert_int_eq(u.ids[u.sp[0] - 1], SPAN_OPEN);
        ck_assert_int_eq(u.ids[u.ep[0] + 1], SPAN_CLOSE);
        for (int j = 0; j < T; j++) ck_assert_int_eq(u.types[j], j >= QUESTION_LEN + 2);
    }
    /* perfect logits at the split's width score 100, the columns past a row's end at -100 */
    size_t rows = 200;
    int S = 64, cols = 2 * S;
    float *logits = malloc(rows * (size_t)cols * sizeof *logits);
    ck_assert_ptr_nonnull(logits);
    for (size_t r = 0; r < rows; r++) {
        ck_assert_int_eq(vt->fill_batch(o.ds, TF_SPLIT_EVAL, &r, 1, &u.b, &err), TF_OK);
        float *l = logits + r * (size_t)cols;
        for (int c = 0; c < cols; c++) l[c] = c < 2 * u.b.seq ? 0.0f : -100.0f;
        l[2 * u.sp[0]] = 10.0f;
        l[2 * u.ep[0] + 1] = 10.0f;
    }
    tf_metrics m;
    ck_assert_int_eq(vt->evaluate(o.ds, TF_SPLIT_EVAL, logits, rows, cols, &m, &err), TF_OK);
    ck_assert_str_eq(m.name[0], "exact");
    ck_assert_double_eq(m.value[0], 100.0);
    free(logits);
    close_o(&o);
}
END_TEST

static const char *open_fails(const char *body, tf_task task)
{
    static tf_error err;
    memset(&err, 0, sizeof err);
    opened o;
    tf_status st = open_body(body, task, &o, &err);
    ck_assert_msg(st == TF_ERR_CONFIG, "expected a config error, got %s: %s", tf_status_name(st), err.msg);
    ck_assert_ptr_null(o.ds);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    tf_config_free(o.cfg);
    return err.msg;
}

START_TEST(config_errors)
{
    const char *m = open_fails("seq_len = 64; min_length = 65;", TF_TASK_CLASSIFICATION);
    ck_assert_ptr_nonnull(strstr(m, "data.min_length 65 is more than seq_len 64"));
    ck_assert_ptr_nonnull(strstr(m, "test.cfg:1"));
    m = open_fails("seq_len = 64; min_length = 2;", TF_TASK_CLASSIFICATION);
    ck_assert_ptr_nonnull(strstr(m, "min_length"));
    m = open_fails("task = \"question-answering\"; seq_len = 64; min_length = 14;", TF_TASK_QUESTION_ANSWERING);
    ck_assert_ptr_nonnull(strstr(m, "min_length"));
    m = open_fails("seq_len = 64; padding = \"shortest\";", TF_TASK_CLASSIFICATION);
    ck_assert_ptr_nonnull(strstr(m, "padding"));
}
END_TEST

int main(void)
{
    tf_log_set_level(TF_LOG_WARN);
    Suite *s = suite_create("data-synthetic");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, lengths_uniform_and_deterministic);
    tcase_add_test(tc, padding_max_length_and_longest);
    tcase_add_test(tc, full_rows_unchanged);
    tcase_add_test(tc, question_answering_short_rows);
    tcase_add_test(tc, config_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

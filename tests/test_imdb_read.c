/* test_imdb_read.c — the IMDB readers (plugins/data-imdb/imdb_read.c): the
 * aclImdb folder layout, review/sentiment CSV and text/label JSONL, their
 * order, byte-for-byte texts, and every error path. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imdb_read.h"
#include "tfcore/log.h"

#define DATA TF_SRCDIR "/tests/data/imdb"

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfcore-imdb-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tree(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void mkdir_p(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- folders ------------------------------------------------------------------ */

START_TEST(folder_train_order_and_bytes)
{
    tf_imdb_data d;
    tf_error err = {0};
    ck_assert_int_eq(tf_imdb_read_folder(DATA "/aclImdb/train", &d, &err), TF_OK);
    ck_assert_uint_eq(d.n, 6); /* unsup/ and urls_pos.txt ignored */
    /* neg first by numeric id (2, 9, 10), then pos (0, 3, 11) */
    static const char *want[6] = {
        "The plot, if you can call it that, goes nowhere. \"Avoid.\"",
        "Mediocre \xe2\x80\x94 the caf\xc3\xa9 scene is the only good part.\r\nSecond line.",
        "Dull.<br /><br />Two hours I will never get back.",
        ("A masterpiece!<br /><br />Na\xc3\xafve and lovely. "
         "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e too."),
        "  Leading spaces and a trailing newline are kept.\n",
        "I laughed, I cried.",
    };
    static const int labels[6] = {0, 0, 0, 1, 1, 1};
    for (size_t i = 0; i < 6; i++) {
        ck_assert_str_eq(d.texts[i], want[i]);
        ck_assert_uint_eq(d.lengths[i], strlen(want[i]));
        ck_assert_int_eq(d.labels[i], labels[i]);
    }
    tf_imdb_data_free(&d);
    ck_assert_uint_eq(d.n, 0);
    tf_imdb_data_free(&d); /* twice is harmless */

    ck_assert_int_eq(tf_imdb_read_folder(DATA "/aclImdb/test", &d, &err), TF_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_str_eq(d.texts[0], "Bad.");
    ck_assert_int_eq(d.labels[0], 0);
    ck_assert_str_eq(d.texts[1], "Good.");
    ck_assert_int_eq(d.labels[1], 1);
    tf_imdb_data_free(&d);
}
END_TEST

START_TEST(folder_errors)
{
    make_tmpdir();
    char path[512], dir[512];
    tf_imdb_data d;
    tf_error err = {0};

    /* missing neg/ */
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "/neg: cannot open"));
    ck_assert_uint_eq(d.n, 0);

    /* an empty class folder: an error naming it, not a run on the other class alone */
    snprintf(dir, sizeof dir, "%s/neg", tmpdir);
    mkdir_p(dir);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "/neg: no <id>_<rating>.txt reviews in this folder"));

    /* missing pos/ */
    char keep[512];
    snprintf(keep, sizeof keep, "%s/neg/5_1.txt", tmpdir);
    write_file(keep, "fine", 4);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "/pos: cannot open"));

    /* pos/ empty (hidden and non-.txt files ignored) */
    snprintf(dir, sizeof dir, "%s/pos", tmpdir);
    mkdir_p(dir);
    snprintf(path, sizeof path, "%s/pos/.hidden.txt", tmpdir);
    write_file(path, "x", 1);
    snprintf(path, sizeof path, "%s/pos/notes.md", tmpdir);
    write_file(path, "x", 1);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "/pos: no <id>_<rating>.txt reviews in this folder"));

    /* a .txt whose name is not <id>_<rating>.txt */
    snprintf(path, sizeof path, "%s/pos/review.txt", tmpdir);
    write_file(path, "x", 1);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "pos/review.txt: file name is not <id>_<rating>.txt"));
    unlink(path);
    snprintf(path, sizeof path, "%s/pos/1_2_3.txt", tmpdir);
    write_file(path, "x", 1);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    unlink(path);
    snprintf(path, sizeof path, "%s/pos/1234567890123456789_1.txt", tmpdir); /* id too long */
    write_file(path, "x", 1);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    unlink(path);
    unlink(keep);

    /* invalid UTF-8 names the file and the byte */
    snprintf(path, sizeof path, "%s/neg/1_1.txt", tmpdir);
    write_file(path, "ok \xff bad", 8);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "neg/1_1.txt: invalid UTF-8 at byte 3"));
    /* overlong, surrogate and > U+10FFFF forms are invalid too */
    static const char *bad[] = {
        "\xc0\x80",         "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xf0\x80\x80\x80", "\xe2\x82",     "\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i], strlen(bad[i]));
        ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
        ck_assert_ptr_nonnull(strstr(err.msg, "invalid UTF-8 at byte 0"));
    }
    /* a NUL byte */
    write_file(path, "a\0b", 3);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "NUL byte at byte 1"));
    /* a directory named like a review */
    unlink(path);
    mkdir_p(path);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "not a regular file"));
    remove_tree(path);

    /* valid again: 4-byte UTF-8 and an empty review */
    write_file(path, "\xf0\x9f\x99\x82", 4);
    snprintf(path, sizeof path, "%s/pos/2_8.txt", tmpdir);
    write_file(path, "", 0);
    ck_assert_int_eq(tf_imdb_read_folder(tmpdir, &d, &err), TF_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_str_eq(d.texts[0], "\xf0\x9f\x99\x82");
    ck_assert_str_eq(d.texts[1], "");
    ck_assert_int_eq(d.labels[1], 1);
    tf_imdb_data_free(&d);
    remove_tree(tmpdir);
}
END_TEST

/* ---- CSV -------------------------------------------------------------------------- */

START_TEST(csv_file)
{
    tf_imdb_data d;
    tf_error err = {0};
    ck_assert_int_eq(tf_imdb_read_csv(DATA "/reviews.csv", &d, &err), TF_OK);
    ck_assert_uint_eq(d.n, 5);
    ck_assert_str_eq(d.texts[0], "One of the best films, \"ever\", I think.");
    ck_assert_int_eq(d.labels[0], 1);
    ck_assert_str_eq(d.texts[1], "Plain and simple review");
    ck_assert_int_eq(d.labels[1], 0);
    ck_assert_str_eq(d.texts[2], "Line one\nline two\r\nline three<br /><br />end");
    ck_assert_int_eq(d.labels[2], 1);
    ck_assert_str_eq(d.texts[3], "");
    ck_assert_uint_eq(d.lengths[3], 0);
    ck_assert_int_eq(d.labels[3], 0);
    ck_assert_str_eq(d.texts[4], "caf\xc3\xa9, na\xc3\xafve \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac");
    ck_assert_int_eq(d.labels[4], 0);
    tf_imdb_data_free(&d);

    ck_assert_int_eq(tf_imdb_read_csv("/nonexistent/reviews.csv", &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/reviews.csv: cannot open"));
    ck_assert_int_eq(tf_imdb_read_csv(DATA "/aclImdb", &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "not a regular file"));
}
END_TEST

static tf_status csv(const char *text, tf_imdb_data *d, tf_error *err)
{
    return tf_imdb_parse_csv(text, strlen(text), "r.csv", d, err);
}

START_TEST(csv_forms)
{
    tf_imdb_data d;
    tf_error err = {0};
    /* CR-only line ends, quoted header, trailing newline, a quoted sentiment */
    ck_assert_int_eq(csv("\"review\",\"sentiment\"\ra,positive\r\"b\r\",\"negative\"\r", &d, &err),
                     TF_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_str_eq(d.texts[0], "a");
    ck_assert_str_eq(d.texts[1], "b\r");
    ck_assert_int_eq(d.labels[1], 0);
    tf_imdb_data_free(&d);
    /* an empty unquoted review, quotes only inside quoted fields */
    ck_assert_int_eq(csv("review,sentiment\n,positive\n\"\"\"\"\"\",negative", &d, &err), TF_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_str_eq(d.texts[0], "");
    ck_assert_str_eq(d.texts[1], "\"\"");
    tf_imdb_data_free(&d);
}
END_TEST

START_TEST(csv_errors)
{
    tf_imdb_data d;
    tf_error err = {0};
    struct {
        const char *text, *msg;
    } cases[] = {
        {"", "r.csv:1: missing the header 'review,sentiment' (empty file)"},
        {"\xef\xbb\xbf", "r.csv:1: missing the header"},
        {"text,label\nx,positive\n",
         "r.csv:1: header is 'text,label', expected 'review,sentiment'"},
        {"review\nx\n", "r.csv:1: header is 'review', expected"},
        {"review,sentiment,extra\n", "r.csv:1: header is 'review,sentiment,...', expected"},
        {"\nreview,sentiment\n", "r.csv:1: header is ''"},
        {"review,sentiment\n", "r.csv: no reviews (empty dataset)"},
        {"review,sentiment\n\n\r\n", "r.csv: no reviews (empty dataset)"},
        {"review,sentiment\nfine,positive\nbad,neutral\n",
         "r.csv:3: row 2: unknown sentiment 'neutral' (expected positive or negative)"},
        {"review,sentiment\nfine,Positive\n", "row 1: unknown sentiment 'Positive'"},
        {"review,sentiment\nonly one field\n",
         "r.csv:2: row 1: expected 2 fields (review,sentiment), found 1"},
        {"review,sentiment\na,b,c\n",
         "r.csv:2: row 1: expected 2 fields (review,sentiment), found 3"},
        {"review,sentiment\n\"a\nb\",positive\n\"never closed,\nnegative\n",
         "r.csv:4: row 2: unterminated quoted field (its quote opens on this line)"},
        {"\"review,sentiment\n", "r.csv:1: header: unterminated quoted field"},
        {"review,sentiment\n\"a\"b,positive\n",
         "r.csv:2: row 1: unexpected 'b' after a closing quote"},
        {"review,sentiment\n\"a\"\x01,positive\n", "unexpected 0x01 after a closing quote"},
        {"review,sentiment\nsay \"hi\",positive\n",
         "r.csv:2: row 1: stray '\"' in an unquoted field"},
        {"review,sentiment\nok,positive\n\"bad \xc3\x28\",negative\n",
         "r.csv:3: row 2: invalid UTF-8 at byte 34 of the file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(csv(cases[i].text, &d, &err) == TF_ERR_DATA, "case %zu accepted", i);
        ck_assert_msg(strstr(err.msg, cases[i].msg) != NULL, "case %zu: got '%s', want '%s'", i,
                      err.msg, cases[i].msg);
        ck_assert_uint_eq(d.n, 0);
        ck_assert_ptr_null(d.texts);
    }
    /* a NUL byte inside a review (length-delimited input) */
    static const char nul[] = "review,sentiment\na\0b,positive\n";
    ck_assert_int_eq(tf_imdb_parse_csv(nul, sizeof nul - 1, "r.csv", &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "r.csv:2: row 1: NUL byte at byte 18 of the file"));
}
END_TEST

/* ---- JSONL ---------------------------------------------------------------------------- */

START_TEST(jsonl_file)
{
    tf_imdb_data d;
    tf_error err = {0};
    ck_assert_int_eq(tf_imdb_read_jsonl(DATA "/reviews.jsonl", &d, &err), TF_OK);
    ck_assert_uint_eq(d.n, 6);
    static const char *texts[6] = {"Loved it.<br /><br />Really.",
                                   "Hated it.",
                                   "caf\xc3\xa9 \xe2\x80\x94 ok",
                                   "Meh.",
                                   "Great \"fun\"",
                                   "Awful"};
    static const int labels[6] = {1, 0, 1, 0, 1, 0};
    for (size_t i = 0; i < 6; i++) {
        ck_assert_str_eq(d.texts[i], texts[i]);
        ck_assert_uint_eq(d.lengths[i], strlen(texts[i]));
        ck_assert_int_eq(d.labels[i], labels[i]);
    }
    tf_imdb_data_free(&d);
    ck_assert_int_eq(tf_imdb_read_jsonl("/nonexistent/r.jsonl", &d, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/r.jsonl: cannot open"));
}
END_TEST

START_TEST(jsonl_errors)
{
    tf_imdb_data d;
    tf_error err = {0};
    struct {
        const char *text, *msg;
    } cases[] = {
        {"", "r.jsonl: no reviews (empty dataset)"},
        {"\n  \n\r\n", "r.jsonl: no reviews (empty dataset)"},
        {"{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": }\n",
         "r.jsonl:2:24: unexpected token near '}'"},
        {"{\"text\": \"a\", \"label\": 1}\n\n{\"text\": \"b\" \"label\": 1}\n", "r.jsonl:3:"},
        {"[1, 2]\n", "r.jsonl:1: not a JSON object"},
        {"{\"label\": 1}\n", "r.jsonl:1: missing 'text'"},
        {"{\"text\": 5, \"label\": 1}\n", "r.jsonl:1: 'text' is not a string"},
        {"{\"text\": \"a\"}\n", "r.jsonl:1: missing 'label'"},
        {"{\"text\": \"a\", \"label\": 2}\n",
         "r.jsonl:1: label 2 is not 0, 1, \"neg\", \"pos\", \"negative\" or \"positive\""},
        {"{\"text\": \"a\", \"label\": \"Positive\"}\n", "r.jsonl:1: label \"Positive\" is not"},
        {"{\"text\": \"a\", \"label\": 1.0}\n", "r.jsonl:1: label 1.0 is not"},
        {"{\"text\": \"a\", \"label\": true}\n", "r.jsonl:1: label true is not"},
        {"{\"text\": \"a\\u0000b\", \"label\": 1}\n", "r.jsonl:1:"},
        {"{\"text\": \"\xff\", \"label\": 1}\n", "r.jsonl:1:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tf_status s =
            tf_imdb_parse_jsonl(cases[i].text, strlen(cases[i].text), "r.jsonl", &d, &err);
        ck_assert_msg(s == TF_ERR_DATA, "case %zu accepted", i);
        ck_assert_msg(strstr(err.msg, cases[i].msg) != NULL, "case %zu: got '%s', want '%s'", i,
                      err.msg, cases[i].msg);
        ck_assert_uint_eq(d.n, 0);
    }
    /* a raw NUL byte: named with line and column, not "end of file expected" */
    static const char raw_nul[] = "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": 0}\0\n";
    ck_assert_int_eq(tf_imdb_parse_jsonl(raw_nul, sizeof raw_nul - 1, "r.jsonl", &d, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "r.jsonl:2:26: NUL byte; a JSONL line is text") != NULL, "got '%s'", err.msg);
}
END_TEST

static Suite *imdb_suite(void)
{
    Suite *s = suite_create("imdb_read");
    TCase *t = tcase_create("folder");
    tcase_add_test(t, folder_train_order_and_bytes);
    tcase_add_test(t, folder_errors);
    suite_add_tcase(s, t);
    t = tcase_create("csv");
    tcase_add_test(t, csv_file);
    tcase_add_test(t, csv_forms);
    tcase_add_test(t, csv_errors);
    suite_add_tcase(s, t);
    t = tcase_create("jsonl");
    tcase_add_test(t, jsonl_file);
    tcase_add_test(t, jsonl_errors);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    tf_log_set_level(TF_LOG_ERROR);
    SRunner *r = srunner_create(imdb_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

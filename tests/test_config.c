/* test_config.c — the config module (tfcore/config.h): loading with
 * @include, error messages (the exact text users read), -o overrides, typed
 * accessors, read tracking, the dump round trip, name suggestions.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfcore/config.h"
#include "tfcore/config_keys.h"

#ifndef TF_TEST_SRCDIR
#define TF_TEST_SRCDIR "."
#endif

static tf_error err;

#define OK(call)                                                               \
    do {                                                                       \
        tf_status st_ = (call);                                                \
        ck_assert_msg(st_ == TF_OK, "%s failed: %s", #call, err.msg);         \
    } while (0)

/* call fails with TF_ERR_CONFIG and exactly the message `expected` */
#define FAILS(call, expected)                                                  \
    do {                                                                       \
        tf_status st_ = (call);                                                \
        ck_assert_msg(st_ == TF_ERR_CONFIG, "%s: status %d (%s)", #call, st_, err.msg); \
        ck_assert_str_eq(err.msg, expected);                                   \
    } while (0)

/* The folder of the test's data files. */
static const char *data(const char *name)
{
    static char buf[4][4096];
    static int next;
    const char *top = getenv("top_srcdir");
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/tests/data/config%s%s", top ? top : TF_TEST_SRCDIR,
             name ? "/" : "", name ? name : "");
    return b;
}

static tf_config *from(const char *text)
{
    tf_config *c = NULL;
    OK(tf_config_load_string(&c, text, "t.cfg", NULL, &err));
    return c;
}

/* --- loading ----------------------------------------------------------------- */

START_TEST(load_file_with_nested_includes)
{
    tf_config *c;
    OK(tf_config_load(&c, data("main.cfg"), &err));
    ck_assert_str_eq(tf_config_path(c), data("main.cfg"));
    tf_section *t = tf_config_section(c, "training"), *m = tf_config_section(c, "model"),
               *d = tf_config_section(c, "data");
    double lr, beta1;
    long long hidden;
    const char *preset, *name;
    OK(tf_cfg_float(t, "learning_rate", 0, 0, 1, &lr, &err));
    ck_assert_double_eq(lr, 3e-5);
    OK(tf_cfg_float(t, "optimizer.beta1", 0.9, 0, 1, &beta1, &err));
    ck_assert_double_eq(beta1, 0.8);
    OK(tf_cfg_string(m, "preset", NULL, &preset, &err));
    ck_assert_str_eq(preset, "bert-base-uncased");
    OK(tf_cfg_int(m, "hidden", 0, 1, 100000, &hidden, &err));
    ck_assert_int_eq(hidden, 768);
    OK(tf_cfg_string(d, "name", NULL, &name, &err));
    ck_assert_str_eq(name, "imdb");
    /* where each value came from: the file that set it, as a path from here */
    char want[4200];
    snprintf(want, sizeof want, "%s:6", data("main.cfg"));
    ck_assert_str_eq(tf_cfg_where(t, "learning_rate"), want);
    snprintf(want, sizeof want, "%s:4", data("base.cfg"));
    ck_assert_str_eq(tf_cfg_where(d, "name"), want);
    snprintf(want, sizeof want, "%s:4", data("common/model.cfg"));
    ck_assert_str_eq(tf_cfg_where(m, "hidden"), want);
    /* an absent key: the config file */
    ck_assert_str_eq(tf_cfg_where(t, "seed"), data("main.cfg"));
    tf_config_free(c);
}
END_TEST

START_TEST(syntax_error_names_file_and_line)
{
    tf_config *c = (tf_config *)1;
    char want[4200];
    snprintf(want, sizeof want, "%s:3: syntax error", data("syntax_error.cfg"));
    FAILS(tf_config_load(&c, data("syntax_error.cfg"), &err), want);
    ck_assert_ptr_null(c);
    FAILS(tf_config_load_string(&c, "a = {\n  b = 1;\n  c = ;\n};\n", "inline.cfg", NULL, &err),
          "inline.cfg:3: syntax error");
    FAILS(tf_config_load_string(&c, "a = 1; a = 2;\n", NULL, NULL, &err),
          "-:1: duplicate setting name");
    /* libconfig 1.5 would read these as x = "abc" and x = 1 */
    FAILS(tf_config_load_string(&c, "x = \"abc\"\n  \"def;\n", "t.cfg", NULL, &err),
          "t.cfg:2: string is not closed (no ending \")");
    FAILS(tf_config_load_string(&c, "x = 1;\n/* a comment\n", "t.cfg", NULL, &err),
          "t.cfg:2: comment is not closed (no ending */)");
    FAILS(tf_config_load_string(&c, "x = 1;\n@include \"abc\n", "t.cfg", NULL, &err),
          "t.cfg:2: string is not closed (no ending \")");
}
END_TEST

START_TEST(error_inside_include_names_the_included_file)
{
    tf_config *c;
    char want[4200];
    snprintf(want, sizeof want, "%s:3: syntax error", data("broken.cfg"));
    FAILS(tf_config_load(&c, data("include_error.cfg"), &err), want);
    /* the same through tf_config_load_string with an include folder */
    FAILS(tf_config_load_string(&c, "x = { a = 1; };\n@include \"broken.cfg\"\n", "s.cfg",
                                data(NULL), &err),
          want);
}
END_TEST

START_TEST(missing_include_names_the_missing_file)
{
    tf_config *c;
    char want[8400];
    snprintf(want, sizeof want,
             "%s:2: cannot open include file '%s': No such file or directory",
             data("missing_include.cfg"), data("does_not_exist.cfg"));
    FAILS(tf_config_load(&c, data("missing_include.cfg"), &err), want);
    /* libconfig 1.5 joins the include folder and an absolute path */
    char text[4200];
    snprintf(text, sizeof text, "a = { x = 1; };\n@include \"%s\"\n", data("base.cfg"));
    snprintf(want, sizeof want,
             "abs.cfg:2: cannot open include file '%s': libconfig 1.5 reads every @include "
             "relative to the folder of the top config file (%s), so write the path relative to it",
             data("base.cfg"), data(NULL));
    FAILS(tf_config_load_string(&c, text, "abs.cfg", data(NULL), &err), want);
    snprintf(want, sizeof want, "%s:1: include file nesting too deep", data("self_include.cfg"));
    FAILS(tf_config_load(&c, data("self_include.cfg"), &err), want);
}
END_TEST

START_TEST(missing_or_unreadable_config_file)
{
    tf_config *c;
    FAILS(tf_config_load(&c, "/nonexistent/x.cfg", &err),
          "/nonexistent/x.cfg: cannot open config file: No such file or directory");
    char want[4200];
    snprintf(want, sizeof want, "%s: not a regular file (directory)", data(NULL));
    FAILS(tf_config_load(&c, data(NULL), &err), want);
    FAILS(tf_config_load(&c, "", &err), "no config file given");
    /* a NUL byte: not a text file */
    char path[] = "/tmp/tfcore-test-config-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "a = 1;\n\0b = 2;\n", 15), 15);
    close(fd);
    snprintf(want, sizeof want, "%s: NUL byte at offset 7; a config file is text", path);
    FAILS(tf_config_load(&c, path, &err), want);
    unlink(path);
}
END_TEST

START_TEST(integers_libconfig_would_wrap)
{
    tf_config *c;
    char want[4200];
    snprintf(want, sizeof want,
             "%s:3: integer 5000000000 does not fit in 32 bits and libconfig would read it "
             "wrong; write 5000000000L for a 64-bit integer",
             data("bigint.cfg"));
    FAILS(tf_config_load(&c, data("bigint.cfg"), &err), want);
    FAILS(tf_config_load(&c, data("bigint_include.cfg"), &err), want); /* in an include */
    FAILS(tf_config_load_string(&c, "a = { x = [1, -3000000000]; };", "t.cfg", NULL, &err),
          "t.cfg:1: integer -3000000000 does not fit in 32 bits and libconfig would read it "
          "wrong; write -3000000000L for a 64-bit integer");
    FAILS(tf_config_load_string(&c, "a = { x = 0xFFFFFFFF; };", "t.cfg", NULL, &err),
          "t.cfg:1: integer 0xFFFFFFFF does not fit in 32 bits and libconfig would read it "
          "wrong; write 0xFFFFFFFFL for a 64-bit integer");
    FAILS(tf_config_load_string(&c, "a = {\n x = 99999999999999999999L; };", "t.cfg", NULL, &err),
          "t.cfg:2: integer 99999999999999999999L is out of the 64-bit range");
    /* numbers inside strings and comments, names with digits, floats: fine */
    c = from("a = {\n  s = \"5000000000\"; # 5000000000\n  /* 5000000000 */ // 5000000000\n"
             "  x1-9 = 5e10; y = 5000000000L; z = 0x7FFFFFFF; w = -2147483648;\n};\n");
    tf_section *a = tf_config_section(c, "a");
    long long y, z, w;
    double x;
    OK(tf_cfg_int(a, "y", 0, 0, LLONG_MAX, &y, &err));
    ck_assert_int_eq(y, 5000000000LL);
    OK(tf_cfg_int(a, "z", 0, 0, LLONG_MAX, &z, &err));
    ck_assert_int_eq(z, 2147483647LL);
    OK(tf_cfg_int(a, "w", 0, LLONG_MIN, 0, &w, &err));
    ck_assert_int_eq(w, -2147483648LL);
    OK(tf_cfg_float(a, "x1-9", 0, 0, INFINITY, &x, &err));
    ck_assert_double_eq(x, 5e10);
    tf_config_free(c);
}
END_TEST

/* --- read tracking ----------------------------------------------------------- */

START_TEST(unknown_key_with_suggestion)
{
    tf_config *c = from("training = {\n  learning_rate = 1e-4;\n  learing_rate = 3e-5;\n};\n");
    tf_section *t = tf_config_section(c, "training");
    double lr;
    OK(tf_cfg_float(t, "learning_rate", 5e-5, 0, INFINITY, &lr, &err));
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:3: unknown key 'training.learing_rate' (did you mean 'learning_rate'?)");
    tf_config_free(c);
}
END_TEST

START_TEST(unknown_key_without_suggestion)
{
    tf_config *c = from("training = {\n  seed = 1;\n  colour = \"red\";\n};\n");
    tf_section *t = tf_config_section(c, "training");
    long long seed;
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &seed, &err));
    FAILS(tf_config_check_unread(c, &err), "t.cfg:3: unknown key 'training.colour'");
    tf_config_free(c);
}
END_TEST

START_TEST(unknown_key_in_nested_group)
{
    tf_config *c =
        from("training = {\n  optimizer = {\n    beta1 = 0.9;\n    bta2 = 0.99;\n  };\n};\n");
    tf_section *t = tf_config_section(c, "training");
    double b1, b2;
    OK(tf_cfg_float(t, "optimizer.beta1", 0.9, 0, 1, &b1, &err));
    OK(tf_cfg_float(t, "optimizer.beta2", 0.999, 0, 1, &b2, &err));
    ck_assert_double_eq(b2, 0.999);
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:4: unknown key 'training.optimizer.bta2' (did you mean 'optimizer.beta2'?)");
    tf_config_free(c);
    /* tf_cfg_has on the group itself does not read what is inside it */
    c = from("training = {\n  optimizer = { beta1 = 0.9; };\n};\n");
    t = tf_config_section(c, "training");
    ck_assert(tf_cfg_has(t, "optimizer"));
    FAILS(tf_config_check_unread(c, &err), "t.cfg:2: unknown key 'training.optimizer.beta1'");
    tf_config_free(c);
}
END_TEST

START_TEST(unknown_section)
{
    tf_config *c = from("training = { seed = 1; };\ntrainng = { seed = 2; };\n");
    tf_section *t = tf_config_section(c, "training");
    tf_config_section(c, "model");
    long long seed;
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &seed, &err));
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:2: unknown section 'trainng' (did you mean 'training'?)");
    tf_config_free(c);

    c = from("training = { seed = 1; };\ncomm = { plugin = \"nccl\"; };\n");
    t = tf_config_section(c, "training");
    tf_config_section(c, "model");
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &seed, &err));
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:2: unknown section 'comm' (sections read: training, model)");
    tf_config_free(c);

    c = from("\n\nextra = 5;\n");
    FAILS(tf_config_check_unread(c, &err), "t.cfg:3: unknown section 'extra'");
    tf_config_free(c);
}
END_TEST

START_TEST(check_unread_clean_when_everything_was_read)
{
    tf_config *c = from("model = { preset = \"x\"; sizes = [1, 2]; names = (\"a\", \"b\");\n"
                        "  opt = { lr = 1; inner = { deep = true; }; }; empty = {}; };\n"
                        "data = {};\n");
    tf_section *m = tf_config_section(c, "model");
    tf_config_section(c, "data");
    const char *preset, **names;
    long long *sizes;
    size_t n;
    double lr;
    bool deep;
    OK(tf_cfg_require_string(m, "preset", &preset, &err));
    OK(tf_cfg_int_list(m, "sizes", &sizes, &n, &err));
    free(sizes);
    OK(tf_cfg_string_list(m, "names", &names, &n, &err));
    free(names);
    OK(tf_cfg_float(m, "opt.lr", 0, 0, 10, &lr, &err));
    /* the unread empty group is reported; reading below it counts */
    OK(tf_cfg_bool(m, "opt.inner.deep", false, &deep, &err));
    FAILS(tf_config_check_unread(c, &err), "t.cfg:2: unknown key 'model.empty'");
    OK(tf_cfg_bool(m, "empty.flag", false, &deep, &err));
    OK(tf_config_check_unread(c, &err));
    ck_assert_str_eq(err.msg, "");
    tf_config_free(c);
}
END_TEST

START_TEST(section_that_is_not_a_group)
{
    tf_config *c = from("training = 5;\n");
    tf_section *t = tf_config_section(c, "training");
    long long seed;
    FAILS(tf_cfg_int(t, "seed", 42, 0, 100, &seed, &err),
          "t.cfg:1: training must be a group of settings ({ ... }), got int 5");
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:1: training must be a group of settings ({ ... }), got int 5");
    ck_assert(!tf_cfg_has(t, "seed"));
    ck_assert_str_eq(tf_cfg_where(t, "seed"), "t.cfg");
    tf_config_free(c);

    c = from("training = {\n  optimizer = 1;\n};\n");
    t = tf_config_section(c, "training");
    double b;
    FAILS(tf_cfg_float(t, "optimizer.beta1", 0.9, 0, 1, &b, &err),
          "t.cfg:2: training.optimizer must be a group of settings ({ ... }), got int 1");
    tf_config_free(c);
}
END_TEST

START_TEST(invalid_key_names)
{
    tf_config *c = from("training = { seed = 1; };");
    tf_section *t = tf_config_section(c, "training");
    long long v;
    FAILS(tf_cfg_int(t, "a..b", 0, 0, 1, &v, &err),
          "invalid key name 'a..b' read from section 'training' (names are "
          "[A-Za-z*][-A-Za-z0-9_*]*, dots separate groups)");
    FAILS(tf_cfg_int(t, "", 0, 0, 1, &v, &err),
          "invalid key name '' read from section 'training' (names are "
          "[A-Za-z*][-A-Za-z0-9_*]*, dots separate groups)");
    FAILS(tf_cfg_int(t, "1x", 0, 0, 1, &v, &err),
          "invalid key name '1x' read from section 'training' (names are "
          "[A-Za-z*][-A-Za-z0-9_*]*, dots separate groups)");
    FAILS(tf_cfg_int(NULL, "x", 0, 0, 1, &v, &err), "config read without a section or a key");
    ck_assert(!tf_cfg_has(t, "a b"));
    ck_assert_str_eq(tf_cfg_where(t, "a b"), "t.cfg");
    tf_config_free(c);
}
END_TEST

/* --- accessors ----------------------------------------------------------------- */

START_TEST(wrong_types)
{
    tf_config *c = from("training = {\n  num_train_epochs = \"two\";\n  seed = 1.5;\n"
                        "  fp16 = 1;\n  output_dir = 5;\n  layers = { a = 1; };\n"
                        "  names = [1, 2];\n  ids = [\"a\"];\n  list = 2.5;\n  slist = true;\n};\n");
    tf_section *t = tf_config_section(c, "training");
    double d;
    long long i, *il;
    bool b;
    const char *s, **sl;
    size_t n;
    FAILS(tf_cfg_float(t, "num_train_epochs", 3, 0, INFINITY, &d, &err),
          "t.cfg:2: training.num_train_epochs must be a number, got string \"two\"");
    FAILS(tf_cfg_int(t, "seed", 42, 0, 100, &i, &err),
          "t.cfg:3: training.seed must be an integer, got float 1.5");
    FAILS(tf_cfg_bool(t, "fp16", false, &b, &err),
          "t.cfg:4: training.fp16 must be true or false, got int 1");
    FAILS(tf_cfg_string(t, "output_dir", "x", &s, &err),
          "t.cfg:5: training.output_dir must be a string, got int 5");
    FAILS(tf_cfg_require_string(t, "output_dir", &s, &err),
          "t.cfg:5: training.output_dir must be a string, got int 5");
    FAILS(tf_cfg_float(t, "layers", 3, 0, INFINITY, &d, &err),
          "t.cfg:6: training.layers must be a number, got a group");
    FAILS(tf_cfg_string_list(t, "names", &sl, &n, &err),
          "t.cfg:7: training.names[0] must be a string, got int 1");
    ck_assert_ptr_null(sl);
    FAILS(tf_cfg_int_list(t, "ids", &il, &n, &err),
          "t.cfg:8: training.ids[0] must be an integer, got string \"a\"");
    ck_assert_ptr_null(il);
    FAILS(tf_cfg_int_list(t, "list", &il, &n, &err),
          "t.cfg:9: training.list must be an integer or a list of integers, got float 2.5");
    FAILS(tf_cfg_string_list(t, "slist", &sl, &n, &err),
          "t.cfg:10: training.slist must be a string or a list of strings, got bool true");
    FAILS(tf_cfg_int(t, "names", 0, 0, 1, &i, &err),
          "t.cfg:7: training.names must be an integer, got a list");
    tf_config_free(c);
}
END_TEST

START_TEST(out_of_range)
{
    tf_config *c = from("training = {\n  batch = 0;\n  lr = -0.5;\n  big = 5000000000L;\n};\n");
    tf_section *t = tf_config_section(c, "training");
    long long i;
    double d;
    FAILS(tf_cfg_int(t, "batch", 8, 1, 1024, &i, &err),
          "t.cfg:2: training.batch must be in [1, 1024], got 0");
    FAILS(tf_cfg_int(t, "batch", 8, 1, LLONG_MAX, &i, &err),
          "t.cfg:2: training.batch must be in [1, inf], got 0");
    FAILS(tf_cfg_require_int(t, "batch", 1, 4, &i, &err),
          "t.cfg:2: training.batch must be in [1, 4], got 0");
    FAILS(tf_cfg_float(t, "lr", 5e-5, 0, INFINITY, &d, &err),
          "t.cfg:3: training.lr must be in [0, inf], got -0.5");
    FAILS(tf_cfg_float(t, "lr", 5e-5, 0.25, 0.75, &d, &err),
          "t.cfg:3: training.lr must be in [0.25, 0.75], got -0.5");
    FAILS(tf_cfg_int(t, "big", 0, LLONG_MIN, 100, &i, &err),
          "t.cfg:4: training.big must be in [-inf, 100], got 5000000000");
    tf_config_free(c);
}
END_TEST

START_TEST(missing_required_keys)
{
    tf_config *c = from("model = { hidden = 1; };\n");
    tf_section *m = tf_config_section(c, "model");
    const char *s = "untouched";
    long long i;
    FAILS(tf_cfg_require_string(m, "preset", &s, &err), "t.cfg: missing required key 'model.preset'");
    ck_assert_str_eq(s, "untouched");
    FAILS(tf_cfg_require_int(m, "layers", 1, 100, &i, &err),
          "t.cfg: missing required key 'model.layers'");
    OK(tf_cfg_require_int(m, "hidden", 1, 100, &i, &err));
    ck_assert_int_eq(i, 1);
    tf_config_free(c);

    OK(tf_config_new(&c, &err));
    m = tf_config_section(c, "model");
    FAILS(tf_cfg_require_string(m, "preset", &s, &err),
          "missing required key 'model.preset' (no config file was given; set it with -o "
          "model.preset=VALUE)");
    tf_config_free(c);
}
END_TEST

START_TEST(defaults_and_promotion)
{
    tf_config *c = from("training = {\n  epochs = 5;\n  big = 5000000000L;\n  neg = -3;\n"
                        "  flag = true;\n  name = \"x\";\n  ratio = 0.25;\n};\n");
    tf_section *t = tf_config_section(c, "training");
    double d;
    long long i;
    bool b;
    const char *s;
    OK(tf_cfg_float(t, "epochs", 3.0, 0, INFINITY, &d, &err)); /* int -> float */
    ck_assert_double_eq(d, 5.0);
    OK(tf_cfg_float(t, "big", 0, 0, INFINITY, &d, &err)); /* int64 -> float */
    ck_assert_double_eq(d, 5e9);
    OK(tf_cfg_int(t, "big", 0, 0, LLONG_MAX, &i, &err));
    ck_assert_int_eq(i, 5000000000LL);
    OK(tf_cfg_int(t, "neg", 0, -10, 10, &i, &err));
    ck_assert_int_eq(i, -3);
    OK(tf_cfg_bool(t, "flag", false, &b, &err));
    ck_assert(b);
    OK(tf_cfg_string(t, "name", NULL, &s, &err));
    ck_assert_str_eq(s, "x");
    OK(tf_cfg_float(t, "ratio", 0, 0, 1, &d, &err));
    ck_assert_double_eq(d, 0.25);
    /* absent keys give the default */
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &i, &err));
    ck_assert_int_eq(i, 42);
    OK(tf_cfg_float(t, "lr", 5e-5, 0, 1, &d, &err));
    ck_assert_double_eq(d, 5e-5);
    OK(tf_cfg_bool(t, "fp16", true, &b, &err));
    ck_assert(b);
    OK(tf_cfg_string(t, "absent", NULL, &s, &err));
    ck_assert_ptr_null(s);
    OK(tf_cfg_string(t, "absent2", "dflt", &s, &err));
    ck_assert_str_eq(s, "dflt");
    ck_assert(tf_cfg_has(t, "epochs"));
    ck_assert(!tf_cfg_has(t, "nothing"));
    /* an absent section reads as empty */
    tf_section *x = tf_config_section(c, "nosuch");
    ck_assert_ptr_eq(x, tf_config_section(c, "nosuch"));
    ck_assert_str_eq(tf_section_name(x), "nosuch");
    OK(tf_cfg_int(x, "k", 7, 0, 10, &i, &err));
    ck_assert_int_eq(i, 7);
    ck_assert(tf_config_has_section(c, "training"));
    ck_assert(!tf_config_has_section(c, "nosuch"));
    OK(tf_config_check_unread(c, &err));
    tf_config_free(c);

    c = from("precision = {};\nmodel = { a = 1; };\n");
    ck_assert(!tf_config_has_section(c, "precision"));
    ck_assert(tf_config_has_section(c, "model"));
    tf_config_free(c);
}
END_TEST

START_TEST(choices)
{
    static const char *const strategies[] = {"no", "steps", "epoch", NULL};
    tf_config *c = from("training = {\n  a = \"epochs\";\n  b = \"sometimes\";\n  c = 3;\n"
                        "  d = \"steps\";\n};\n");
    tf_section *t = tf_config_section(c, "training");
    const char *v;
    FAILS(tf_cfg_choice(t, "a", "no", strategies, &v, &err),
          "t.cfg:2: training.a must be one of no, steps, epoch; got 'epochs' (did you mean "
          "'epoch'?)");
    FAILS(tf_cfg_choice(t, "b", "no", strategies, &v, &err),
          "t.cfg:3: training.b must be one of no, steps, epoch; got 'sometimes'");
    FAILS(tf_cfg_choice(t, "c", "no", strategies, &v, &err),
          "t.cfg:4: training.c must be one of no, steps, epoch; got int 3");
    OK(tf_cfg_choice(t, "d", "no", strategies, &v, &err));
    ck_assert_ptr_eq(v, strategies[1]);
    OK(tf_cfg_choice(t, "e", "epoch", strategies, &v, &err));
    ck_assert_str_eq(v, "epoch");
    OK(tf_cfg_choice(t, "f", NULL, strategies, &v, &err));
    ck_assert_ptr_null(v);
    tf_config_free(c);
}
END_TEST

START_TEST(lists)
{
    tf_config *c = from("m = {\n  a = [1, 2, 3];\n  b = (4, 5L);\n  c = 7;\n  d = [];\n"
                        "  e = [\"x\", \"y\"];\n  f = \"solo\";\n  g = ();\n  h = (1, \"x\");\n};\n");
    tf_section *m = tf_config_section(c, "m");
    long long *il;
    const char **sl;
    size_t n;
    OK(tf_cfg_int_list(m, "a", &il, &n, &err));
    ck_assert_uint_eq(n, 3);
    ck_assert(il[0] == 1 && il[1] == 2 && il[2] == 3);
    free(il);
    OK(tf_cfg_int_list(m, "b", &il, &n, &err));
    ck_assert_uint_eq(n, 2);
    ck_assert(il[0] == 4 && il[1] == 5);
    free(il);
    OK(tf_cfg_int_list(m, "c", &il, &n, &err)); /* a scalar is a one-element list */
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(il[0], 7);
    free(il);
    OK(tf_cfg_int_list(m, "d", &il, &n, &err));
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(il);
    OK(tf_cfg_int_list(m, "absent", &il, &n, &err));
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(il);
    OK(tf_cfg_string_list(m, "e", &sl, &n, &err));
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(sl[0], "x");
    ck_assert_str_eq(sl[1], "y");
    free(sl);
    OK(tf_cfg_string_list(m, "f", &sl, &n, &err));
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(sl[0], "solo");
    free(sl);
    OK(tf_cfg_string_list(m, "g", &sl, &n, &err));
    ck_assert_uint_eq(n, 0);
    FAILS(tf_cfg_int_list(m, "h", &il, &n, &err),
          "t.cfg:9: m.h[1] must be an integer, got string \"x\"");
    tf_config_free(c);
}
END_TEST

/* --- overrides ----------------------------------------------------------------- */

START_TEST(override_forms)
{
    tf_config *c = from("training = {\n  learning_rate = 0.1;\n  seed = 1;\n  names = [\"a\"];\n"
                        "  opt = { beta1 = 0.9; };\n  big = 1;\n  steps = 500;\n};\n");
    OK(tf_config_override(c, "training.learning_rate=2", &err)); /* int -> existing float */
    /* float over an int, as the file could say (logging_steps = 0.5): the reader decides */
    OK(tf_config_override(c, "training.steps=0.5", &err));
    OK(tf_config_override(c, "training.seed=-7", &err));
    OK(tf_config_override(c, "training.eps=1e-5", &err));
    OK(tf_config_override(c, "training.neg=-0.5", &err));
    OK(tf_config_override(c, "training.fp16=true", &err));
    OK(tf_config_override(c, "training.bf16=FALSE", &err));
    OK(tf_config_override(c, "training.output_dir=\"runs/x y\"", &err));
    OK(tf_config_override(c, "training.plugin=nccl", &err));
    OK(tf_config_override(c, "  training.path = /tmp/a=b  ", &err));
    OK(tf_config_override(c, "training.layers=[1,2]", &err));
    OK(tf_config_override(c, "training.names=[\"b\", \"c\"]", &err));
    OK(tf_config_override(c, "training.mixed=(1, \"x\")", &err));
    OK(tf_config_override(c, "training.opt.beta2=0.98", &err)); /* into a nested group */
    OK(tf_config_override(c, "training.opt.beta1=0.5", &err));
    OK(tf_config_override(c, "training.new.deep.key=3", &err)); /* creates the groups */
    OK(tf_config_override(c, "newsection.key=\"v\"", &err));
    OK(tf_config_override(c, "training.big=5000000000", &err)); /* widens to 64 bits */
    OK(tf_config_override(c, "training.huge=-5000000000", &err));
    OK(tf_config_override(c, "training.hex=0x10", &err));
    OK(tf_config_override(c, "training.empty=\"\"", &err));
    OK(tf_config_override(c, "training.names=\"only\"", &err)); /* a list takes a scalar */

    tf_section *t = tf_config_section(c, "training");
    double d;
    long long i, *il;
    bool b;
    const char *s, **sl;
    size_t n;
    OK(tf_cfg_float(t, "learning_rate", 0, 0, 10, &d, &err));
    ck_assert_double_eq(d, 2.0);
    OK(tf_cfg_float(t, "steps", 0, 0, 1000, &d, &err));
    ck_assert_double_eq(d, 0.5);
    OK(tf_cfg_int(t, "seed", 0, -10, 10, &i, &err));
    ck_assert_int_eq(i, -7);
    OK(tf_cfg_float(t, "eps", 0, 0, 1, &d, &err));
    ck_assert_double_eq(d, 1e-5);
    OK(tf_cfg_float(t, "neg", 0, -1, 1, &d, &err));
    ck_assert_double_eq(d, -0.5);
    OK(tf_cfg_bool(t, "fp16", false, &b, &err));
    ck_assert(b);
    OK(tf_cfg_bool(t, "bf16", true, &b, &err));
    ck_assert(!b);
    OK(tf_cfg_string(t, "output_dir", NULL, &s, &err));
    ck_assert_str_eq(s, "runs/x y");
    OK(tf_cfg_string(t, "plugin", NULL, &s, &err));
    ck_assert_str_eq(s, "nccl");
    OK(tf_cfg_string(t, "path", NULL, &s, &err));
    ck_assert_str_eq(s, "/tmp/a=b");
    OK(tf_cfg_int_list(t, "layers", &il, &n, &err));
    ck_assert(n == 2 && il[0] == 1 && il[1] == 2);
    free(il);
    OK(tf_cfg_string_list(t, "names", &sl, &n, &err));
    ck_assert(n == 1 && strcmp(sl[0], "only") == 0);
    free(sl);
    OK(tf_cfg_string_list(t, "empty", &sl, &n, &err));
    ck_assert(n == 1 && strcmp(sl[0], "") == 0);
    free(sl);
    ck_assert(tf_cfg_has(t, "mixed"));
    OK(tf_cfg_float(t, "opt.beta1", 0, 0, 1, &d, &err));
    ck_assert_double_eq(d, 0.5);
    OK(tf_cfg_float(t, "opt.beta2", 0, 0, 1, &d, &err));
    ck_assert_double_eq(d, 0.98);
    OK(tf_cfg_int(t, "new.deep.key", 0, 0, 10, &i, &err));
    ck_assert_int_eq(i, 3);
    OK(tf_cfg_int(t, "big", 0, 0, LLONG_MAX, &i, &err));
    ck_assert_int_eq(i, 5000000000LL);
    OK(tf_cfg_int(t, "huge", 0, LLONG_MIN, 0, &i, &err));
    ck_assert_int_eq(i, -5000000000LL);
    OK(tf_cfg_int(t, "hex", 0, 0, 100, &i, &err));
    ck_assert_int_eq(i, 16);
    OK(tf_cfg_string(tf_config_section(c, "newsection"), "key", NULL, &s, &err));
    ck_assert_str_eq(s, "v");
    /* where: the override, as typed */
    ck_assert_str_eq(tf_cfg_where(t, "seed"), "-o training.seed=-7");
    ck_assert_str_eq(tf_cfg_where(t, "path"), "-o training.path = /tmp/a=b");
    ck_assert_str_eq(tf_cfg_where(t, "new.deep.key"), "-o training.new.deep.key=3");
    OK(tf_config_check_unread(c, &err));
    tf_config_free(c);
}
END_TEST

START_TEST(override_errors_name_the_assignment)
{
    tf_config *c = from("training = {\n  seed = 1;\n  name = \"x\";\n  opt = { a = 1; };\n"
                        "  lr = 0.1;\n  flag = true;\n};\nscalar = 3;\n");
    FAILS(tf_config_override(c, "training.seed", &err),
          "-o training.seed: expected SECTION.KEY=VALUE (no '=')");
    FAILS(tf_config_override(c, "=5", &err), "-o =5: expected SECTION.KEY=VALUE (no key before '=')");
    FAILS(tf_config_override(c, "seed=5", &err),
          "-o seed=5: expected SECTION.KEY=VALUE; 'seed' names no section (e.g. training.seed)");
    FAILS(tf_config_override(c, "training..seed=5", &err),
          "-o training..seed=5: '' is not a valid key name (a letter or '*', then letters, "
          "digits, '_', '-' or '*')");
    FAILS(tf_config_override(c, "training.2x=5", &err),
          "-o training.2x=5: '2x' is not a valid key name (a letter or '*', then letters, "
          "digits, '_', '-' or '*')");
    FAILS(tf_config_override(c, "training.seed=", &err),
          "-o training.seed=: no value after '=' (write training.seed=\"\" for an empty string)");
    FAILS(tf_config_override(c, "training.name=\"abc", &err),
          "-o training.name=\"abc: a string is not closed (no ending \")");
    FAILS(tf_config_override(c, "training.name=\"abc\" \"def", &err),
          "-o training.name=\"abc\" \"def: a string is not closed (no ending \")");
    FAILS(tf_config_override(c, "training.name=1 /* c", &err),
          "-o training.name=1 /* c: a comment is not closed (no ending */)");
    FAILS(tf_config_override(c, "training.l=[a, b]", &err),
          "-o training.l=[a, b]: cannot read the value: syntax error (strings inside a list need "
          "quotes: [\"a\", \"b\"])");
    FAILS(tf_config_override(c, "training.l=[1, \"a\"]", &err),
          "-o training.l=[1, \"a\"]: cannot read the value: mismatched element type in array "
          "(strings inside a list need quotes: [\"a\", \"b\"])");
    FAILS(tf_config_override(c, "training.l=[1, 2", &err),
          "-o training.l=[1, 2: cannot read the value: syntax error (strings inside a list need "
          "quotes: [\"a\", \"b\"])");
    FAILS(tf_config_override(c, "training.g={a=1;}", &err),
          "-o training.g={a=1;}: a group cannot be set with -o; set its keys one by one "
          "(training.g.KEY=VALUE)");
    FAILS(tf_config_override(c, "training.v=\"a\"; y = 1", &err),
          "-o training.v=\"a\"; y = 1: cannot read the value: more than one value");
    FAILS(tf_config_override(c, "training.v=\"a\"; x = 1", &err),
          "-o training.v=\"a\"; x = 1: cannot read the value: duplicate setting name");
    FAILS(tf_config_override(c, "training.lr=1.2.3", &err),
          "-o training.lr=1.2.3: '1.2.3' is not a number (to set a string, quote it: "
          "training.lr=\"1.2.3\")");
    FAILS(tf_config_override(c, "training.lr=3e-5x", &err),
          "-o training.lr=3e-5x: '3e-5x' is not a number (to set a string, quote it: "
          "training.lr=\"3e-5x\")");
    FAILS(tf_config_override(c, "training.x=99999999999999999999", &err),
          "-o training.x=99999999999999999999: integer 99999999999999999999 is out of the 64-bit "
          "range");
    FAILS(tf_config_override(c, "training.x=[1, 5000000000]", &err),
          "-o training.x=[1, 5000000000]: integer 5000000000 does not fit in 32 bits; write "
          "5000000000L for a 64-bit integer");
    FAILS(tf_config_override(c, "training.x=99999999999999999999L", &err),
          "-o training.x=99999999999999999999L: integer 99999999999999999999L is out of the "
          "64-bit range");
    FAILS(tf_config_override(c, "training.x=a\nb", &err),
          "-o training.x=a\\nb: the assignment contains a control character (\\x0A)");
    /* type clashes with what the file set */
    FAILS(tf_config_override(c, "training.seed=abc", &err),
          "-o training.seed=abc: training.seed is an int (t.cfg:2), got string \"abc\"");
    FAILS(tf_config_override(c, "training.seed=[1]", &err),
          "-o training.seed=[1]: training.seed is an int (t.cfg:2), got a list");
    FAILS(tf_config_override(c, "training.name=12", &err),
          "-o training.name=12: training.name is a string (t.cfg:3), got int 12; quote it to set "
          "a string: training.name=\"...\"");
    FAILS(tf_config_override(c, "training.flag=1", &err),
          "-o training.flag=1: training.flag is a bool (t.cfg:6), got int 1");
    FAILS(tf_config_override(c, "training.lr=yes", &err),
          "-o training.lr=yes: training.lr is a float (t.cfg:5), got string \"yes\"");
    FAILS(tf_config_override(c, "training.opt=1", &err),
          "-o training.opt=1: training.opt is a group (t.cfg:4); set its keys one by one "
          "(training.opt.KEY=VALUE)");
    FAILS(tf_config_override(c, "training.seed.x=1", &err),
          "-o training.seed.x=1: training.seed is an int (t.cfg:2), not a group");
    FAILS(tf_config_override(c, "scalar.x=1", &err),
          "-o scalar.x=1: scalar is an int (t.cfg:8), not a group");
    /* a later override checks against an earlier one */
    OK(tf_config_override(c, "training.k=5", &err));
    FAILS(tf_config_override(c, "training.k=\"s\"", &err),
          "-o training.k=\"s\": training.k is an int (-o training.k=5), got string \"s\"");
    /* nothing of the failed ones was applied */
    tf_section *t = tf_config_section(c, "training");
    long long i;
    OK(tf_cfg_int(t, "seed", 0, 0, 10, &i, &err));
    ck_assert_int_eq(i, 1);
    ck_assert(!tf_cfg_has(t, "x"));
    ck_assert(!tf_cfg_has(t, "g"));
    ck_assert(!tf_cfg_has(t, "l"));
    /* after reading started */
    FAILS(tf_config_override(c, "training.seed=2", &err),
          "-o training.seed=2: overrides must be applied before the config is read");
    FAILS(tf_config_override(c, NULL, &err), "-o: no assignment given");
    tf_config_free(c);
}
END_TEST

START_TEST(override_locations_in_accessor_errors)
{
    tf_config *c = from("training = { learning_rate = 0.1; };\n");
    OK(tf_config_override(c, "training.learning_rate=-1", &err));
    OK(tf_config_override(c, "training.seed=abc", &err));
    tf_section *t = tf_config_section(c, "training");
    double d;
    long long i;
    FAILS(tf_cfg_float(t, "learning_rate", 5e-5, 0, INFINITY, &d, &err),
          "-o training.learning_rate=-1: training.learning_rate must be in [0, inf], got -1");
    FAILS(tf_cfg_int(t, "seed", 42, 0, 100, &i, &err),
          "-o training.seed=abc: training.seed must be an integer, got string \"abc\"");
    tf_config_free(c);

    /* a list element set by -o */
    c = from("m = { a = 1; };");
    OK(tf_config_override(c, "m.ids=[\"x\", \"y\"]", &err));
    long long *il;
    size_t n;
    FAILS(tf_cfg_int_list(tf_config_section(c, "m"), "ids", &il, &n, &err),
          "-o m.ids=[\"x\", \"y\"]: m.ids[0] must be an integer, got string \"x\"");
    tf_config_free(c);
}
END_TEST

START_TEST(override_of_unknown_key_is_caught)
{
    tf_config *c = from("training = { learning_rate = 0.1; };\n");
    OK(tf_config_override(c, "training.lerning_rate=1e-3", &err));
    tf_section *t = tf_config_section(c, "training");
    double d;
    OK(tf_cfg_float(t, "learning_rate", 5e-5, 0, INFINITY, &d, &err));
    FAILS(tf_config_check_unread(c, &err),
          "-o training.lerning_rate=1e-3: unknown key 'training.lerning_rate' (did you mean "
          "'learning_rate'?)");
    tf_config_free(c);

    /* file keys first, then overrides in the order given */
    c = from("training = {\n  learning_rate = 0.1;\n  sed = 3;\n};\n");
    OK(tf_config_override(c, "trainin.seed=4", &err));
    OK(tf_config_override(c, "training.learning_rate=0.2", &err));
    t = tf_config_section(c, "training");
    long long i;
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &i, &err));
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:3: unknown key 'training.sed' (did you mean 'seed'?)");
    ck_assert(tf_cfg_has(t, "sed"));
    FAILS(tf_config_check_unread(c, &err),
          "-o trainin.seed=4: unknown section 'trainin' (did you mean 'training'?)");
    tf_config_free(c);

    /* a key overridden twice is checked once, at the last -o */
    c = from("training = { };\n");
    OK(tf_config_override(c, "training.sed=1", &err));
    OK(tf_config_override(c, "training.sed=2", &err));
    t = tf_config_section(c, "training");
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &i, &err));
    FAILS(tf_config_check_unread(c, &err),
          "-o training.sed=2: unknown key 'training.sed' (did you mean 'seed'?)");
    tf_config_free(c);
}
END_TEST

START_TEST(override_on_an_empty_config)
{
    tf_config *c;
    OK(tf_config_new(&c, &err));
    ck_assert_str_eq(tf_config_path(c), "-");
    OK(tf_config_override(c, "model.preset=\"bert-base\"", &err));
    ck_assert(tf_config_has_section(c, "model"));
    const char *s;
    OK(tf_cfg_require_string(tf_config_section(c, "model"), "preset", &s, &err));
    ck_assert_str_eq(s, "bert-base");
    OK(tf_config_check_unread(c, &err));
    tf_config_free(c);
}
END_TEST

/* --- the dump ------------------------------------------------------------------- */

static char *dump_to_string(const tf_config *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    tf_config_dump(c, f);
    fclose(f);
    return buf;
}

/* Read every key the round-trip test uses; returns a summary string. */
static void read_all(tf_config *c, char *out, size_t n)
{
    tf_section *t = tf_config_section(c, "training"), *m = tf_config_section(c, "model");
    double lr, eps, beta2, tiny, huge_f;
    long long seed, big, hidden, *layers;
    bool fp16, flag;
    const char *name, *odd, *dflt, **tags;
    size_t nl, nt;
    OK(tf_cfg_float(t, "learning_rate", 5e-5, 0, 1, &lr, &err));
    OK(tf_cfg_float(t, "adam_epsilon", 1e-8, 0, 1, &eps, &err));
    OK(tf_cfg_float(t, "optimizer.beta2", 0.999, 0, 1, &beta2, &err));
    OK(tf_cfg_float(t, "tiny", 0.1 + 0.2, 0, 1, &tiny, &err));
    OK(tf_cfg_float(t, "huge", 1e300, 0, INFINITY, &huge_f, &err));
    OK(tf_cfg_int(t, "seed", 42, 0, 100, &seed, &err));
    OK(tf_cfg_int(t, "big", 6000000000LL, 0, LLONG_MAX, &big, &err));
    OK(tf_cfg_bool(t, "fp16", false, &fp16, &err));
    OK(tf_cfg_bool(t, "sched.warm.flag", true, &flag, &err));
    OK(tf_cfg_string(t, "name", "n\"q\\x\n\ty\x01", &name, &err));
    OK(tf_cfg_string(m, "odd", NULL, &odd, &err));
    OK(tf_cfg_string(m, "absent_default", "d", &dflt, &err));
    OK(tf_cfg_int(m, "hidden", 0, 0, 10000, &hidden, &err));
    OK(tf_cfg_int_list(m, "layers", &layers, &nl, &err));
    OK(tf_cfg_string_list(m, "tags", &tags, &nt, &err));
    ck_assert(tf_cfg_has(m, "nested"));
    ck_assert(tf_cfg_has(m, "empty"));
    ck_assert(tf_cfg_has(m, "deep.x"));
    snprintf(out, n,
             "lr=%.17g eps=%.17g beta2=%.17g tiny=%.17g huge=%.17g seed=%lld big=%lld fp16=%d "
             "flag=%d name=[%s] odd=[%s] dflt=[%s] hidden=%lld layers=%zu:%lld,%lld "
             "tags=%zu:%s,%s",
             lr, eps, beta2, tiny, huge_f, seed, big, fp16, flag, name, odd, dflt, hidden, nl,
             layers[0], layers[nl - 1], nt, tags[0], tags[nt - 1]);
    free(layers);
    free(tags);
}

START_TEST(dump_round_trip)
{
    tf_config *c = from("model = {\n  odd = \"tab\\there \\\"quoted\\\" back\\\\slash\";\n"
                        "  hidden = 768;\n  layers = [1, 2, 3];\n  tags = (\"a\", \"b\");\n"
                        "  nested = ( { x = 1; }, ( 2, \"three\" ), [] );\n  empty = {};\n"
                        "  deep = { x = 1; };\n};\n"
                        "training = {\n  learning_rate = 3e-5;\n  seed = 7;\n};\n"
                        "extra = 1.5;\n");
    OK(tf_config_override(c, "training.fp16=true", &err));
    OK(tf_config_override(c, "training.adam_epsilon=1e-6", &err));
    char before[2048], after[2048];
    read_all(c, before, sizeof before);
    char *text = dump_to_string(c);
    /* defaults are marked, overrides too */
    ck_assert_ptr_nonnull(strstr(text, "  seed = 7;\n"));
    ck_assert_ptr_nonnull(strstr(text, "  fp16 = true; # -o\n"));
    ck_assert_ptr_nonnull(strstr(text, "  big = 6000000000L; # default\n"));
    ck_assert_ptr_nonnull(strstr(text, "  tiny = 0.30000000000000004; # default\n"));
    ck_assert_ptr_nonnull(strstr(text, "  huge = 1e+300; # default\n"));
    ck_assert_ptr_nonnull(strstr(text, "    beta2 = 0.999; # default\n"));
    ck_assert_ptr_nonnull(strstr(text, "  name = \"n\\\"q\\\\x\\n\\ty\\x01\"; # default\n"));
    ck_assert_ptr_nonnull(strstr(text, "extra = 1.5;\n"));
    /* libconfig reads it back, with the same values */
    tf_config *back;
    OK(tf_config_load_string(&back, text, "dump.cfg", NULL, &err));
    read_all(back, after, sizeof after);
    ck_assert_str_eq(before, after);
    tf_config_section(back, "extra");
    tf_config_section(c, "extra");
    /* same unread settings: only the top-level scalar 'extra' */
    FAILS(tf_config_check_unread(c, &err),
          "t.cfg:14: extra must be a group of settings ({ ... }), got float 1.5");
    char *text2 = dump_to_string(back);
    /* dumping the dump changes nothing but the markers */
    ck_assert_ptr_null(strstr(text2, "; # -o"));
    ck_assert_ptr_nonnull(strstr(text2, "  seed = 7;\n"));
    free(text);
    free(text2);
    tf_config_free(back);
    tf_config_free(c);
}
END_TEST

START_TEST(dump_of_defaults_only)
{
    tf_config *c;
    OK(tf_config_new(&c, &err));
    tf_section *t = tf_config_section(c, "training");
    tf_config_section(c, "unread");
    double d;
    long long i;
    const char *s;
    OK(tf_cfg_float(t, "num_train_epochs", 3.0, 0, INFINITY, &d, &err));
    OK(tf_cfg_float(t, "max_grad_norm", INFINITY, -INFINITY, INFINITY, &d, &err));
    OK(tf_cfg_float(t, "maybe", NAN, -INFINITY, INFINITY, &d, &err));
    OK(tf_cfg_int(t, "a.b.c", 1, 0, 10, &i, &err));
    OK(tf_cfg_int(t, "a.b.d", 2, 0, 10, &i, &err));
    OK(tf_cfg_int(t, "a.e", 3, 0, 10, &i, &err));
    OK(tf_cfg_string(t, "none", NULL, &s, &err));
    char *text = dump_to_string(c);
    ck_assert_str_eq(text,
                     "# tfcore config: -\n"
                     "# with -o overrides (# -o) and the defaults of keys that were read (# "
                     "default)\n"
                     "training = {\n"
                     "  num_train_epochs = 3.0; # default\n"
                     "  max_grad_norm = 1e999; # default\n"
                     "  # maybe: the default is nan, which libconfig cannot write\n"
                     "  a = {\n"
                     "    b = {\n"
                     "      c = 1; # default\n"
                     "      d = 2; # default\n"
                     "    };\n"
                     "    e = 3; # default\n"
                     "  };\n"
                     "};\n");
    tf_config *back;
    OK(tf_config_load_string(&back, text, "dump.cfg", NULL, &err));
    t = tf_config_section(back, "training");
    OK(tf_cfg_float(t, "max_grad_norm", 0, -INFINITY, INFINITY, &d, &err));
    ck_assert(isinf(d) && d > 0);
    OK(tf_cfg_int(t, "a.b.d", 0, 0, 10, &i, &err));
    ck_assert_int_eq(i, 2);
    free(text);
    tf_config_free(back);
    tf_config_free(c);
}
END_TEST

/* --- several configs at once ------------------------------------------------------- */

static void *worker(void *arg)
{
    int id = (int)(size_t)arg;
    for (int k = 0; k < 200; k++) {
        char text[256], ov[64], want[32];
        snprintf(text, sizeof text, "training = { seed = %d; typo%d = 1; };\n", id, id);
        tf_error e;
        tf_config *c;
        if (tf_config_load_string(&c, text, "w.cfg", NULL, &e) != TF_OK) return (void *)1;
        snprintf(ov, sizeof ov, "training.learning_rate=%d", k);
        if (tf_config_override(c, ov, &e) != TF_OK) return (void *)2;
        tf_section *t = tf_config_section(c, "training");
        long long seed;
        double lr;
        if (tf_cfg_int(t, "seed", 0, 0, 100, &seed, &e) || seed != id) return (void *)3;
        if (tf_cfg_float(t, "learning_rate", 0, 0, 1000, &lr, &e) || lr != k) return (void *)4;
        if (tf_config_check_unread(c, &e) != TF_ERR_CONFIG) return (void *)5;
        snprintf(want, sizeof want, "typo%d", id);
        if (!strstr(e.msg, want)) return (void *)6;
        FILE *f = fopen("/dev/null", "w");
        tf_config_dump(c, f);
        fclose(f);
        tf_config_free(c);
    }
    return NULL;
}

START_TEST(configs_in_parallel_threads)
{
    pthread_t th[4];
    for (size_t i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
    }
}
END_TEST

/* --- suggestions -------------------------------------------------------------------- */

START_TEST(edit_distance_and_closest)
{
    ck_assert_uint_eq(tf_edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(tf_edit_distance("", "abc"), 3);
    ck_assert_uint_eq(tf_edit_distance("abc", ""), 3);
    ck_assert_uint_eq(tf_edit_distance("same", "same"), 0);
    ck_assert_uint_eq(tf_edit_distance("learing_rate", "learning_rate"), 1);
    ck_assert_uint_eq(tf_edit_distance("ab", "ba"), 2);
    static const char *const keys[] = {"learning_rate", "seed", "num_train_epochs", NULL, "sed"};
    ck_assert_str_eq(tf_closest("learing_rate", keys, 3), "learning_rate");
    ck_assert_str_eq(tf_closest("sede", keys, 3), "seed");
    ck_assert_str_eq(tf_closest("sed", keys, 5), "sed"); /* exact; NULL entries skipped */
    ck_assert_ptr_null(tf_closest("colour", keys, 3));
    ck_assert_ptr_null(tf_closest("x", keys, 0));
    /* the threshold: max(2, strlen(word) / 3) */
    static const char *const c9[] = {"abcdefXYZ"};
    ck_assert_str_eq(tf_closest("abcdefghi", c9, 1), "abcdefXYZ"); /* 3 <= 9/3 */
    static const char *const c9b[] = {"abcdeWXYZ"};
    ck_assert_ptr_null(tf_closest("abcdefghi", c9b, 1)); /* 4 > 3 */
    static const char *const c2[] = {"cd"};
    ck_assert_str_eq(tf_closest("ab", c2, 1), "cd"); /* 2 <= max(2, 0) */
    /* ties: the first candidate */
    static const char *const tie[] = {"abx", "aby"};
    ck_assert_str_eq(tf_closest("abz", tie, 2), "abx");
}
END_TEST

/* --- key tables (tfcore/config_keys.h) --------------------------------------- */

static const char *const colours[] = {"red", "green", NULL};
static const tf_cfg_key table[] = {
    {"n", TF_CFG_KEY_INT, .int_def = 3, .int_min = 1, .int_max = 10, .doc = "how many"},
    {"id", TF_CFG_KEY_INT, .required = true, .int_min = 0, .int_max = INT64_MAX, .doc = "which"},
    {"rate", TF_CFG_KEY_FLOAT, .float_def = 0.1, .float_min = 0.0, .float_max = INFINITY, .doc = "how fast"},
    {"on", TF_CFG_KEY_BOOL, .bool_def = true, .default_text = "the model's", .doc = "whether"},
    {"file", TF_CFG_KEY_STRING, .doc = "where"},
    {"colour", TF_CFG_KEY_CHOICE, .string_def = "red", .choices = colours, .doc = "which colour"},
    {"frac", TF_CFG_KEY_FLOAT, .float_def = 0.5, .float_min = 0.0, .min_open = true, .float_max = 1.0,
     .max_open = true, .why = "a share", .doc = "how much"},
    {"scale", TF_CFG_KEY_FLOAT, .float_def = 10, .float_min = 1e-12, .float_max = 1e6, .doc = "how large"},
    {0},
};

START_TEST(key_table_reads_with_its_defaults_and_bounds)
{
    tf_config *c = from("data = { id = 7; rate = 2; colour = \"green\"; };");
    tf_section *d = tf_config_section(c, "data");
    long long n, id;
    double rate;
    bool on;
    const char *file, *colour;
    OK(tf_cfg_key_int(d, table, "n", &n, &err));
    OK(tf_cfg_key_int(d, table, "id", &id, &err));
    OK(tf_cfg_key_float(d, table, "rate", &rate, &err));
    OK(tf_cfg_key_bool(d, table, "on", &on, &err));
    OK(tf_cfg_key_string(d, table, "file", &file, &err));
    OK(tf_cfg_key_string(d, table, "colour", &colour, &err));
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(id, 7);
    ck_assert(rate == 2.0 && on && !file);
    ck_assert_str_eq(colour, "green");
    OK(tf_config_check_unread(c, &err));
    /* a key the table does not have, or has with another type: the plugin's bug */
    ck_assert_int_eq(tf_cfg_key_int(d, table, "m", &n, &err), TF_ERR_PLUGIN);
    ck_assert_str_eq(err.msg, "the key table of section 'data' has no int key 'm'");
    ck_assert_int_eq(tf_cfg_key_bool(d, table, "n", &on, &err), TF_ERR_PLUGIN);
    tf_config_free(c);
    /* bounds and required keys give the accessors' messages */
    c = from("data = { n = 11; };");
    d = tf_config_section(c, "data");
    FAILS(tf_cfg_key_int(d, table, "n", &n, &err), "t.cfg:1: data.n must be in [1, 10], got 11");
    tf_config_free(c);
    /* open ends, and the reason for them */
    c = from("data = { frac = 1.0; };");
    d = tf_config_section(c, "data");
    FAILS(tf_cfg_key_float(d, table, "frac", &rate, &err), "t.cfg:1: data.frac must be in (0, 1), got 1 (a share)");
    ck_assert_int_eq(tf_cfg_key_int(d, table, "id", &id, &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "missing required key 'data.id'"), "%s", err.msg);
    tf_config_free(c);
}
END_TEST

START_TEST(key_table_as_markdown)
{
    char *md = tf_cfg_keys_markdown(table);
    ck_assert_ptr_nonnull(md);
    ck_assert_str_eq(md, "| key | type | default | bounds | what |\n"
                         "| --- | --- | --- | --- | --- |\n"
                         "| `n` | int | 3 | [1, 10] | how many |\n"
                         "| `id` | int | required | [0, inf] | which |\n"
                         "| `rate` | float | 0.1 | [0, inf] | how fast |\n"
                         "| `on` | bool | the model's |  | whether |\n"
                         "| `file` | string | unset |  | where |\n"
                         "| `colour` | choice | \"red\" | `red`, `green` | which colour |\n"
                         "| `frac` | float | 0.5 | (0, 1) | how much (bounds: a share) |\n"
                         "| `scale` | float | 10 | [1e-12, 1000000] | how large |\n");
    free(md);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, load_file_with_nested_includes);
    tcase_add_test(tc, key_table_reads_with_its_defaults_and_bounds);
    tcase_add_test(tc, key_table_as_markdown);
    tcase_add_test(tc, syntax_error_names_file_and_line);
    tcase_add_test(tc, error_inside_include_names_the_included_file);
    tcase_add_test(tc, missing_include_names_the_missing_file);
    tcase_add_test(tc, missing_or_unreadable_config_file);
    tcase_add_test(tc, integers_libconfig_would_wrap);
    tcase_add_test(tc, unknown_key_with_suggestion);
    tcase_add_test(tc, unknown_key_without_suggestion);
    tcase_add_test(tc, unknown_key_in_nested_group);
    tcase_add_test(tc, unknown_section);
    tcase_add_test(tc, check_unread_clean_when_everything_was_read);
    tcase_add_test(tc, section_that_is_not_a_group);
    tcase_add_test(tc, invalid_key_names);
    tcase_add_test(tc, wrong_types);
    tcase_add_test(tc, out_of_range);
    tcase_add_test(tc, missing_required_keys);
    tcase_add_test(tc, defaults_and_promotion);
    tcase_add_test(tc, choices);
    tcase_add_test(tc, lists);
    tcase_add_test(tc, override_forms);
    tcase_add_test(tc, override_errors_name_the_assignment);
    tcase_add_test(tc, override_locations_in_accessor_errors);
    tcase_add_test(tc, override_of_unknown_key_is_caught);
    tcase_add_test(tc, override_on_an_empty_config);
    tcase_add_test(tc, dump_round_trip);
    tcase_add_test(tc, dump_of_defaults_only);
    tcase_add_test(tc, configs_in_parallel_threads);
    tcase_add_test(tc, edit_distance_and_closest);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

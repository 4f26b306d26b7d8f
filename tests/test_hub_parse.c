/* test_hub_parse.c — reading the hub's answers and names as huggingface_hub
 * 0.36 does (core/sdk/hub_parse.c, core/sdk/hub_cache.c): ETag
 * normalisation (_normalize_etag), header precedence (get_hf_file_metadata),
 * refs files, repo ids (validate_repo_id), revision names, the
 * models--org--name folder. The expected values were checked against
 * huggingface_hub's own functions.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub_internal.h"

static const char *norm(const char *in)
{
    static char out[160];
    ck_assert_msg(hub_normalize_etag(in, strlen(in), out, sizeof out), "'%s' did not fit", in);
    return out;
}

START_TEST(etag_normalisation)
{
    /* _normalize_etag: etag.lstrip("W/").strip('"') */
    ck_assert_str_eq(norm("\"abc\""), "abc");
    ck_assert_str_eq(norm("W/\"abc\""), "abc");
    ck_assert_str_eq(norm("abc"), "abc");
    ck_assert_str_eq(norm("W/abc"), "abc");
    ck_assert_str_eq(norm("Wabc"), "abc");         /* lstrip drops characters, not a prefix */
    ck_assert_str_eq(norm("//W\"x\"y\""), "x\"y"); /* inner quotes stay */
    ck_assert_str_eq(norm("\"\""), "");
    char small[4];
    ck_assert(!hub_normalize_etag("\"abcdef\"", 8, small, sizeof small));
    ck_assert(!hub_normalize_etag("a\nb", 3, small, sizeof small)); /* control bytes refused */
    ck_assert(hub_etag_is_safe("767314eb19fc17c1a8df4dda28973a334a2821e778a4668556a7ce0ce924eeab"));
    ck_assert(!hub_etag_is_safe(""));
    ck_assert(!hub_etag_is_safe(".."));
    ck_assert(!hub_etag_is_safe("a/b"));
    ck_assert(!hub_etag_is_safe("a b"));
    ck_assert(hub_etag_is_sha256("767314eb19fc17c1a8df4dda28973a334a2821e778a4668556a7ce0ce924eeab"));
    ck_assert(!hub_etag_is_sha256("29e76b6e476a69fc024ca3239d8d89eb2a23c6c0")); /* a git sha1 */
}
END_TEST

static void feed(hub_meta *m, const char *lines)
{
    const char *p = lines;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p + 1) : strlen(p);
        hub_meta_header(m, p, n);
        p += n;
    }
}

START_TEST(headers)
{
    hub_meta m;
    hub_meta_reset(&m);
    /* an LFS file: X-Linked-* win over ETag / Content-Length, names in any case */
    feed(&m, "HTTP/1.1 302 Found\r\n"
             "x-repo-commit: f116d1ccc060226dd8fe899a7c739db47c10fb36\r\n"
             "ETag: \"29e76b6e476a69fc024ca3239d8d89eb2a23c6c0\"\r\n"
             "X-Linked-Etag:   \"767314eb19fc17c1a8df4dda28973a334a2821e778a4668556a7ce0ce924eeab\"  \r\n"
             "Content-Length: 1234\r\n"
             "X-Linked-Size: 74632\r\n"
             "Location: https://cdn.example/lfs/7673?x=1\r\n\r\n");
    hub_meta_finish(&m);
    ck_assert_int_eq(m.status, 302);
    ck_assert_str_eq(m.commit, "f116d1ccc060226dd8fe899a7c739db47c10fb36");
    ck_assert_str_eq(m.etag, "767314eb19fc17c1a8df4dda28973a334a2821e778a4668556a7ce0ce924eeab");
    ck_assert_int_eq(m.size, 74632);
    ck_assert_str_eq(m.location, "https://cdn.example/lfs/7673?x=1");
    /* a small file: ETag and Content-Length; X-Linked-Size "0" still wins (Python's `or` on strings) */
    hub_meta_reset(&m);
    feed(&m, "HTTP/2 200\r\nETag: W/\"abc\"\r\nContent-Length: 594\r\n");
    hub_meta_finish(&m);
    ck_assert_int_eq(m.status, 200);
    ck_assert_str_eq(m.etag, "abc");
    ck_assert_int_eq(m.size, 594);
    feed(&m, "X-Linked-Size: 0\r\n");
    hub_meta_finish(&m);
    ck_assert_int_eq(m.size, 0);
    /* a new response (a redirect followed) forgets the earlier headers */
    feed(&m, "HTTP/1.1 404 Not Found\r\nX-Error-Code: EntryNotFound\r\n");
    hub_meta_finish(&m);
    ck_assert_int_eq(m.status, 404);
    ck_assert_str_eq(m.etag, "");
    ck_assert_int_eq(m.size, -1);
    ck_assert_str_eq(m.error_code, "EntryNotFound");
    /* a Location longer than its field is refused, never cut short */
    hub_meta_reset(&m);
    char *big = malloc(9100);
    strcpy(big, "Location: https://cdn.example/");
    memset(big + strlen(big), 'a', 9000);
    big[9030] = '\0';
    hub_meta_header(&m, big, strlen(big));
    free(big);
    ck_assert(m.overflow);
    ck_assert_str_eq(m.location, "");
    /* sizes that are not plain decimals are unknown */
    hub_meta_reset(&m);
    feed(&m, "Content-Length: 12x\r\n");
    hub_meta_finish(&m);
    ck_assert_int_eq(m.size, -1);
}
END_TEST

START_TEST(refs_and_revisions)
{
    char c[41];
    ck_assert(hub_parse_ref("f116d1ccc060226dd8fe899a7c739db47c10fb36", 40, c, sizeof c));
    ck_assert_str_eq(c, "f116d1ccc060226dd8fe899a7c739db47c10fb36");
    ck_assert(hub_parse_ref("f116d1ccc060226dd8fe899a7c739db47c10fb36\n", 41, c, sizeof c));
    ck_assert(!hub_parse_ref("F116D1CCC060226DD8FE899A7C739DB47C10FB36", 40, c, sizeof c));
    ck_assert(!hub_parse_ref("f116d1cc", 8, c, sizeof c));
    ck_assert(!hub_parse_ref("", 0, c, sizeof c));
    ck_assert(hub_revision_is_safe("main"));
    ck_assert(hub_revision_is_safe("v1.0"));
    ck_assert(hub_revision_is_safe("refs/pr/1"));
    ck_assert(!hub_revision_is_safe(""));
    ck_assert(!hub_revision_is_safe("../x"));
    ck_assert(!hub_revision_is_safe("a/../b"));
    ck_assert(!hub_revision_is_safe("/main"));
    ck_assert(!hub_revision_is_safe("a//b"));
    ck_assert(!hub_revision_is_safe("a b"));
}
END_TEST

START_TEST(repo_ids)
{
    ck_assert(tf_hub_is_repo_id("bert-base-cased"));
    ck_assert(tf_hub_is_repo_id("google-bert/bert-base-cased"));
    ck_assert(tf_hub_is_repo_id("sentence-transformers/all-MiniLM-L6-v2"));
    ck_assert(tf_hub_is_repo_id("a_b.c/d"));
    ck_assert(!tf_hub_is_repo_id(""));
    ck_assert(!tf_hub_is_repo_id("a/b/c"));
    ck_assert(!tf_hub_is_repo_id("./x"));
    ck_assert(!tf_hub_is_repo_id("../x"));
    ck_assert(!tf_hub_is_repo_id("/abs/path"));
    ck_assert(!tf_hub_is_repo_id("a--b"));
    ck_assert(!tf_hub_is_repo_id("a..b"));
    ck_assert(!tf_hub_is_repo_id("-a"));
    ck_assert(!tf_hub_is_repo_id("a."));
    ck_assert(!tf_hub_is_repo_id("a b"));
    char long_id[100];
    memset(long_id, 'a', 97);
    long_id[97] = '\0';
    ck_assert(!tf_hub_is_repo_id(long_id));
    char f[256];
    hub_repo_folder("google-bert/bert-base-cased", f, sizeof f);
    ck_assert_str_eq(f, "models--google-bert--bert-base-cased");
    hub_repo_folder("bert-base-cased", f, sizeof f);
    ck_assert_str_eq(f, "models--bert-base-cased");
}
END_TEST

START_TEST(environment)
{
    hub_env env;
    tf_error err = {0};
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    unsetenv("HF_TOKEN");
    setenv("HF_TOKEN_PATH", "/nonexistent/token", 1);
    setenv("HOME", "/home/u", 1);
    unsetenv("HF_HOME");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HF_ENDPOINT");
    setenv("HF_HUB_OFFLINE", "0", 1);
    setenv("TRANSFORMERS_OFFLINE", "yes", 1);
    ck_assert_int_eq(hub_env_read(&env, &err), TF_OK);
    ck_assert_str_eq(env.cache, "/home/u/.cache/huggingface/hub");
    ck_assert_str_eq(env.endpoint, "https://huggingface.co");
    ck_assert(env.offline);
    setenv("XDG_CACHE_HOME", "/x", 1);
    setenv("HF_ENDPOINT", "http://127.0.0.1:1//", 1);
    unsetenv("TRANSFORMERS_OFFLINE");
    setenv("HF_TOKEN", "  hf_abc\n", 1);
    ck_assert_int_eq(hub_env_read(&env, &err), TF_OK);
    ck_assert_str_eq(env.cache, "/x/huggingface/hub");
    ck_assert_str_eq(env.endpoint, "http://127.0.0.1:1");
    ck_assert_str_eq(env.token, "hf_abc");
    ck_assert(!env.offline);
    setenv("HF_HOME", "/h", 1);
    ck_assert_int_eq(hub_env_read(&env, &err), TF_OK);
    ck_assert_str_eq(env.cache, "/h/hub");
    setenv("HF_HUB_CACHE", "/c", 1);
    ck_assert_int_eq(hub_env_read(&env, &err), TF_OK);
    ck_assert_str_eq(env.cache, "/c");
    setenv("TFCORE_HUB_TIMEOUT_S", "abc", 1);
    ck_assert_int_eq(hub_env_read(&env, &err), TF_ERR_CONFIG);
    ck_assert_str_eq(err.msg, "TFCORE_HUB_TIMEOUT_S='abc' is not a number of seconds in (0, 3600]");
    unsetenv("TFCORE_HUB_TIMEOUT_S");
}
END_TEST

/* parse TEXT as an index: status, and (on success) the names joined by ' ' */
static tf_status shards(const char *text, char *joined, size_t n, tf_error *err)
{
    char **names;
    size_t k;
    joined[0] = '\0';
    tf_status st = hub_index_shards(text, strlen(text), "index.json", &names, &k, err);
    if (st) return st;
    for (size_t i = 0; i < k; i++)
        snprintf(joined + strlen(joined), n - strlen(joined), "%s%s", i ? " " : "", names[i]);
    hub_shards_free(names, k);
    return TF_OK;
}

START_TEST(index_shards)
{
    tf_error err = {0};
    char j[256];
    ck_assert_int_eq(shards("{\"metadata\": {}, \"weight_map\": {\"a\": \"m-2.safetensors\", "
                            "\"b\": \"m-1.safetensors\", \"c\": \"m-2.safetensors\"}}", j, sizeof j, &err),
                     TF_OK);
    ck_assert_str_eq(j, "m-1.safetensors m-2.safetensors");
    const char *bad[] = {"../m.safetensors", "sub/m.safetensors", "..", ".", "", "/etc/passwd",
                         "a\\\\b", "a\\nb"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "{\"weight_map\": {\"t\": \"%s\"}}", bad[i]);
        ck_assert_int_eq(shards(text, j, sizeof j, &err), TF_ERR_DATA);
        ck_assert_msg(strstr(err.msg, "index.json: weight_map['t'] = '") && strstr(err.msg, "is not a plain file name; refused"),
                      "%s: %s", bad[i], err.msg);
    }
    ck_assert_int_eq(shards("{\"weight_map\": {}}", j, sizeof j, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "index.json: no \"weight_map\" object naming each tensor's shard");
    ck_assert_int_eq(shards("{\"weight_map\": {\"t\": 3}}", j, sizeof j, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "index.json: weight_map['t'] is not a string");
    ck_assert_int_eq(shards("{\"weight_map\": {\"t\": \"a\", \"t\": \"b\"}}", j, sizeof j, &err), TF_ERR_DATA);
    ck_assert_int_eq(shards("[1,", j, sizeof j, &err), TF_ERR_DATA);
    ck_assert(strncmp(err.msg, "index.json:1:", 13) == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hub_parse");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, etag_normalisation);
    tcase_add_test(tc, headers);
    tcase_add_test(tc, refs_and_revisions);
    tcase_add_test(tc, repo_ids);
    tcase_add_test(tc, environment);
    tcase_add_test(tc, index_shards);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

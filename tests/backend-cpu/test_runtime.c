/* tests/backend-cpu/test_runtime.c — backend-cpu: the plugin descriptor, open and its errors,
 * the config keys, memory, streams and events (tests/backend-cpu/fixture.h says how every
 * family is tested). */
#include "fixture.h"

/* --- plugin descriptor, open, close, supports ------------------------------- */

START_TEST(test_descriptor)
{
    const tf_plugin *p = tfcore_plugin_entry();
    ck_assert_uint_eq(p->magic, TF_PLUGIN_MAGIC);
    ck_assert_uint_eq(p->abi_major, TF_ABI_MAJOR);
    ck_assert_uint_eq(p->kind, TF_KIND_BACKEND);
    ck_assert_str_eq(p->name, "cpu");
    ck_assert_uint_eq(vt->size, sizeof(tf_backend_vtable));
    char why[64] = "";
    ck_assert_ptr_nonnull(p->probe);
    ck_assert_int_eq(p->probe(why, sizeof why), 1);
    /* every slot of ABI 1.0 is set */
    const void *const *slot = (const void *const *)((const char *)vt + offsetof(tf_backend_vtable, check_config));
    size_t nslots = (offsetof(tf_backend_vtable, finite_check) + sizeof(void *) -
                     offsetof(tf_backend_vtable, check_config)) / sizeof(void *);
    for (size_t i = 0; i < nslots; i++) ck_assert_msg(slot[i] != NULL, "slot %zu is NULL", i);
    /* ABI 1.1: host memory, no native streams, not limited by a device count */
    ck_assert(TF_HAS(vt, host_memory) && vt->host_memory(be));
    ck_assert(!TF_HAS(vt, native_stream));
    ck_assert(TF_HAS(vt, device_count) && vt->device_count(NULL, 0) == -1);
}
END_TEST

START_TEST(test_open_and_describe)
{
    const char *name = vt->device_name(be);
    ck_assert_ptr_nonnull(strstr(name, "2 threads"));
    ck_assert_ptr_nonnull(strstr(name, "OpenBLAS"));
    ck_assert_ptr_nonnull(strstr(vt->device_name(be1), "1 thread,"));
    ck_assert(vt->supports(be, TF_MATMUL_FP32, TF_DTYPE_F32));
    ck_assert(!vt->supports(be, TF_MATMUL_TF32, TF_DTYPE_F32));
    ck_assert(!vt->supports(be, TF_MATMUL_F16, TF_DTYPE_F16));
    ck_assert(!vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_BF16));
    ck_assert(!vt->supports(be, TF_MATMUL_FP32, TF_DTYPE_F16));
    ck_assert(!vt->supports(be, TF_MATMUL_FP32, TF_DTYPE_BF16));
    /* threads = 0: the OpenMP default, at least one */
    tf_backend *b0 = open_threads(0);
    ck_assert_int_ge(b0->threads, 1);
    vt->close(b0);
    vt->close(NULL);
}
END_TEST

START_TEST(test_open_errors)
{
    tf_backend *b = (tf_backend *)&err;
    tf_backend_open_args a = {sizeof a, 0, 1, 0, NULL, 1};
    ASSERT_ERR(vt->open(NULL, &b, &err), TF_ERR_RUNTIME, "args is NULL");
    ASSERT_ERR(vt->open(&a, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    a.size = 8;
    ASSERT_ERR(vt->open(&a, &b, &err), TF_ERR_PLUGIN, "open_args.size is 8");
    ck_assert_ptr_null(b);
    a.size = sizeof a;
    a.threads = -1;
    ASSERT_ERR(vt->open(&a, &b, &err), TF_ERR_RUNTIME, "threads must be in [0, 1024], got -1");
    a.threads = 1;
    a.device = -2;
    ASSERT_ERR(vt->open(&a, &b, &err), TF_ERR_RUNTIME, "device must be >= 0");
}
END_TEST

static tf_section *backend_section(const char *text, tf_config **cfg)
{
    ck_assert_int_eq(tf_config_load_string(cfg, text, "test.cfg", NULL, &err), TF_OK);
    return tf_config_section(*cfg, "backend");
}

START_TEST(test_config_threads)
{
    ck_assert_int_eq(vt->check_config(NULL, &err), TF_OK);
    tf_config *cfg = NULL;
    tf_section *sec = backend_section("backend = { plugin = \"cpu\"; threads = 1; };", &cfg);
    ck_assert_int_eq(vt->check_config(sec, &err), TF_OK);
    tf_backend_open_args a = {sizeof a, 0, 0, 0, sec, 1};
    tf_backend *b = NULL;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    ck_assert_int_eq(b->threads, 1);
    vt->close(b);
    a.threads = 2; /* the core's explicit count wins over the config */
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    ck_assert_int_eq(b->threads, 2);
    vt->close(b);
    tf_config_free(cfg);

    sec = backend_section("backend = { threads = -3; };", &cfg);
    tf_error_clear(&err);
    ck_assert_int_eq(vt->check_config(sec, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "threads"));
    a.threads = 0;
    a.section = sec;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_ERR_CONFIG);
    tf_config_free(cfg);

    sec = backend_section("backend = { threads = \"many\"; };", &cfg);
    ck_assert_int_eq(vt->check_config(sec, &err), TF_ERR_CONFIG);
    tf_config_free(cfg);
}
END_TEST

/* --- memory, streams, events -------------------------------------------------- */

START_TEST(test_memory)
{
    tf_backend_mem_info mi;
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
    ck_assert_uint_gt(mi.total, 0);
    ck_assert_uint_gt(mi.free, 0);
    void *a = NULL, *b = NULL, *z = NULL;
    ck_assert_int_eq(vt->alloc(be, 1000, TF_MEM_DEVICE, &a, &err), TF_OK);
    ck_assert_int_eq(vt->alloc(be, 3, TF_MEM_HOST_PINNED, &b, &err), TF_OK);
    ck_assert_int_eq(vt->alloc(be, 0, TF_MEM_DEVICE, &z, &err), TF_OK);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    ck_assert_uint_eq((uintptr_t)b % 64, 0);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 1003);
    ck_assert_uint_eq(mi.peak, 1003);
    memset(a, 0x5a, 1000);
    ck_assert_int_eq(vt->memset(be, a, 7, 10, NULL), TF_OK);
    ck_assert_int_eq(((unsigned char *)a)[9], 7);
    ck_assert_int_eq(((unsigned char *)a)[10], 0x5a);
    for (int k = TF_COPY_HOST_TO_DEVICE; k <= TF_COPY_HOST_TO_HOST; k++) {
        ((unsigned char *)b)[0] = 0;
        ck_assert_int_eq(vt->memcpy(be, b, a, 3, (tf_memcpy_kind)k, NULL), TF_OK);
        ck_assert_int_eq(((unsigned char *)b)[0], 7);
    }
    /* overlapping copy is a move */
    unsigned char *ua = a;
    for (int i = 0; i < 20; i++) ua[i] = (unsigned char)i;
    ck_assert_int_eq(vt->memcpy(be, ua + 1, ua, 10, TF_COPY_DEVICE_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(ua[1], 0);
    ck_assert_int_eq(ua[10], 9);
    ck_assert_int_eq(vt->memcpy(be, b, a, 0, TF_COPY_HOST_TO_HOST, NULL), TF_OK);
    ck_assert_int_eq(vt->memcpy(be, b, a, 3, (tf_memcpy_kind)9, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->memcpy(be, NULL, a, 3, TF_COPY_HOST_TO_HOST, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->memset(be, NULL, 0, 3, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->memset(be, NULL, 0, 0, NULL), TF_OK);
    /* large copies and fills go over the team: odd sizes, overlapping moves */
    size_t big = ((size_t)3 << 20) + 13;
    unsigned char *p = malloc(big + 100), *q = malloc(big + 100);
    for (size_t i = 0; i < big + 100; i++) p[i] = (unsigned char)(i * 7 + 3);
    ck_assert_int_eq(vt->memcpy(be, q, p, big, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(memcmp(p, q, big), 0);
    ck_assert_int_eq(vt->memcpy(be, p + 100, p, big, TF_COPY_DEVICE_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(memcmp(p + 100, q, big), 0);
    ck_assert_int_eq(vt->memset(be, q + 1, 0xab, big - 1, NULL), TF_OK);
    ck_assert_int_eq(q[0], p[100]);
    ASSERT_ALL(big - 1, q[i + 1] == 0xab);
    free(p), free(q);
    vt->free(be, a, TF_MEM_DEVICE);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 3);
    ck_assert_uint_eq(mi.peak, 1003);
    vt->free(be, b, TF_MEM_HOST_PINNED);
    vt->free(be, z, TF_MEM_DEVICE);
    vt->free(be, NULL, TF_MEM_DEVICE);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
}
END_TEST

START_TEST(test_memory_errors)
{
    void *p = &err;
    ASSERT_ERR(vt->alloc(be, SIZE_MAX / 2, TF_MEM_DEVICE, &p, &err), TF_ERR_RUNTIME,
               "out of memory allocating 9223372036854775807 bytes of device memory");
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(err.msg, "bytes free of"));
    ASSERT_ERR(vt->alloc(be, SIZE_MAX, TF_MEM_HOST_PINNED, &p, &err), TF_ERR_RUNTIME,
               "more than can be addressed");
    ASSERT_ERR(vt->alloc(be, 16, (tf_mem_kind)5, &p, &err), TF_ERR_RUNTIME,
               "unknown memory kind 5");
    ASSERT_ERR(vt->alloc(be, 16, TF_MEM_DEVICE, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    ASSERT_ERR(vt->alloc(NULL, 16, TF_MEM_DEVICE, &p, &err), TF_ERR_RUNTIME, "backend is NULL");
    tf_backend_mem_info mi;
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
    ck_assert_uint_eq(mi.peak, 0);
    /* freeing something alloc did not return is refused, not a heap corruption */
    char *q = NULL;
    ck_assert_int_eq(vt->alloc(be, 64, TF_MEM_DEVICE, (void **)&q, &err), TF_OK);
    tf_log_level level = tf_log_get_level();
    tf_log_set_level(TF_LOG_QUIET); /* the refusals are logged as errors */
    vt->free(be, q + 64, TF_MEM_DEVICE); /* points into q's block; its "header" is q's data */
    memset(q, 0, 64);
    vt->free(be, q + 64, TF_MEM_DEVICE);
    tf_log_set_level(level);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 64);
    vt->free(be, q, TF_MEM_DEVICE);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
}
END_TEST

START_TEST(test_streams_events)
{
    tf_stream *s = NULL, *s1 = NULL;
    tf_event *e = NULL;
    ck_assert_int_eq(vt->stream_create(be, &s, &err), TF_OK);
    ck_assert_int_eq(vt->stream_create(be1, &s1, &err), TF_OK);
    ck_assert_int_eq(vt->event_create(be, &e, &err), TF_OK);
    ck_assert_int_eq(vt->event_record(be, e, s), TF_OK);
    ck_assert_int_eq(vt->event_record(be, e, NULL), TF_OK);
    ck_assert_int_eq(vt->stream_wait_event(be, s, e), TF_OK);
    ck_assert_int_eq(vt->stream_wait_event(be, NULL, e), TF_OK);
    ck_assert_int_eq(vt->event_sync(be, e, &err), TF_OK);
    ck_assert_int_eq(vt->stream_sync(be, s, &err), TF_OK);
    ck_assert_int_eq(vt->stream_sync(be, NULL, &err), TF_OK);
    /* an op on a stream is done when it returns */
    float x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(vt->scale(be, s, x, 4, 2.0f, TF_DTYPE_F32, &err), TF_OK);
    ck_assert(x[3] == 8.0f);
    /* errors */
    ck_assert_int_eq(vt->event_record(be, NULL, s), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->event_record(be, e, s1), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->event_record(be1, e, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->stream_wait_event(be, s, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->stream_wait_event(be, s1, e), TF_ERR_RUNTIME);
    ASSERT_ERR(vt->event_sync(be, NULL, &err), TF_ERR_RUNTIME, "event is NULL");
    ASSERT_ERR(vt->event_sync(be1, e, &err), TF_ERR_RUNTIME, "another backend");
    ASSERT_ERR(vt->stream_sync(be, s1, &err), TF_ERR_RUNTIME, "another backend");
    ASSERT_ERR(vt->stream_create(be, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    ASSERT_ERR(vt->event_create(be, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    vt->event_destroy(be, e);
    vt->stream_destroy(be, s);
    vt->stream_destroy(be1, s1);
    vt->stream_destroy(be, NULL);
    vt->event_destroy(be, NULL);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"descriptor", test_descriptor},
        {"open", test_open_and_describe},
        {"open_errors", test_open_errors},
        {"config", test_config_threads},
        {"memory", test_memory},
        {"memory_errors", test_memory_errors},
        {"streams", test_streams_events},
    };
    return backend_cpu_main("backend_cpu_runtime", cases, TF_TEST_COUNT(cases));
}

/* test_safetensors.c — the safetensors reader and writer: every rejection of
 * the format (files crafted byte by byte here), round trips of every dtype
 * (0-d scalars, zero-size tensors, metadata), the f32 conversions, byte
 * identity with a file the Python package wrote (tests/data/safetensors/), and
 * the atomic write's failure paths (write, fsync, rename, directory fsync). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tfcore/safetensors.h"

/* ---- fault injection: this fsync replaces libc's for libtfcore too ------- */

static int fail_fsync_file, fail_fsync_dir;

int fsync(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) == 0 && (S_ISDIR(sb.st_mode) ? fail_fsync_dir : fail_fsync_file)) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fsync, fd);
}

/* ---- helpers ------------------------------------------------------------- */

/* A file image: 8-byte length, header, then dlen data bytes (0, 1, 2, ...). */
typedef struct image {
    unsigned char *bytes; /* [size] */
    size_t size;
} image;

static image mkimage_n(const char *header, size_t hlen, size_t dlen)
{
    image im = {malloc(8 + hlen + dlen + 1), 8 + hlen + dlen};
    ck_assert_ptr_nonnull(im.bytes);
    for (int i = 0; i < 8; i++) im.bytes[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(im.bytes + 8, header, hlen);
    for (size_t i = 0; i < dlen; i++) im.bytes[8 + hlen + i] = (unsigned char)i;
    return im;
}

static image mkimage(const char *header, size_t dlen) { return mkimage_n(header, strlen(header), dlen); }

static tf_safetensors *open_ok(const image *im)
{
    tf_safetensors *st = NULL;
    tf_error err = {0};
    tf_status rc = tf_safetensors_open_memory(im->bytes, im->size, "m.safetensors", &st, &err);
    ck_assert_msg(rc == TF_OK, "rejected a valid file: %s", err.msg);
    return st;
}

/* Open bytes that must be rejected; check the one-line message has the file
 * name, "byte <at>:" and the fragments. */
static void expect_reject_image(image im, long long at, const char *frag1, const char *frag2)
{
    tf_safetensors *st = (tf_safetensors *)1;
    tf_error err = {0};
    tf_status rc = tf_safetensors_open_memory(im.bytes, im.size, "m.safetensors", &st, &err);
    ck_assert_msg(rc == TF_ERR_DATA, "accepted (rc %d), expected an error with '%s'", rc, frag1);
    ck_assert_ptr_null(st);
    ck_assert_msg(strncmp(err.msg, "m.safetensors: byte ", 20) == 0, "message lacks the file: %s", err.msg);
    if (at >= 0) {
        char b[48];
        snprintf(b, sizeof b, "m.safetensors: byte %lld: ", at);
        ck_assert_msg(strncmp(err.msg, b, strlen(b)) == 0, "message '%s' does not start with '%s'", err.msg, b);
    }
    ck_assert_msg(strstr(err.msg, frag1), "message '%s' lacks '%s'", err.msg, frag1);
    ck_assert_msg(!frag2 || strstr(err.msg, frag2), "message '%s' lacks '%s'", err.msg, frag2);
    ck_assert_msg(!strchr(err.msg, '\n'), "message has a newline: %s", err.msg);
    free(im.bytes);
}

#define REJECT(header, dlen, at, f1, f2) expect_reject_image(mkimage(header, dlen), at, f1, f2)

/* A valid entry "a": F32 [1] at [0, 4). */
#define ENTRY_A "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"

static char tmpdir[64];

static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/tfcore-st-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static void remove_tmpdir(void) { nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    ck_assert_uint_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Entries of tmpdir whose name contains ".tmp." (left-over temp files). */
static int count_temp_files(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static const char *fixture_path(void)
{
    static char p[4096];
    const char *top = getenv("top_srcdir");
    snprintf(p, sizeof p, "%s/tests/data/safetensors/torch_mixed.safetensors", top ? top : TF_SRCDIR);
    return p;
}

/* ---- reading: valid files ------------------------------------------------ */

START_TEST(test_minimal)
{
    image im = mkimage("{" ENTRY_A "}", 4);
    tf_safetensors *st = open_ok(&im);
    ck_assert_uint_eq(tf_safetensors_count(st), 1);
    const tf_st_tensor *t = tf_safetensors_at(st, 0);
    ck_assert_str_eq(t->name, "a");
    ck_assert_int_eq(t->dtype, TF_DTYPE_F32);
    ck_assert_int_eq(t->ndim, 1);
    ck_assert_int_eq(t->shape[0], 1);
    ck_assert_uint_eq(t->numel, 1);
    ck_assert_uint_eq(t->nbytes, 4);
    ck_assert_uint_eq(t->file_offset, im.size - 4);
    ck_assert_ptr_eq(t->data, im.bytes + im.size - 4);
    ck_assert_ptr_null(tf_safetensors_at(st, 1));
    ck_assert_ptr_eq(tf_safetensors_find(st, "a"), t);
    ck_assert_ptr_null(tf_safetensors_find(st, "b"));
    size_t nm = 7;
    tf_safetensors_metadata(st, &nm);
    ck_assert_uint_eq(nm, 0);
    ck_assert_ptr_null(tf_safetensors_metadata_get(st, "format"));
    ck_assert_str_eq(tf_safetensors_path(st), "m.safetensors");
    tf_safetensors_close(st);
    tf_safetensors_close(NULL);
    free(im.bytes);
}
END_TEST

START_TEST(test_empty_file_and_padding)
{
    /* no tensors, no data: what the package writes for {} */
    image im = mkimage("{}      ", 0);
    tf_safetensors *st = open_ok(&im);
    ck_assert_uint_eq(tf_safetensors_count(st), 0);
    ck_assert_ptr_null(tf_safetensors_find(st, "a"));
    tf_safetensors_close(st);
    free(im.bytes);
    /* trailing JSON whitespace of any kind, unknown fields ignored (as the package) */
    im = mkimage("{\"a\":{\"x\":[1,{\"y\":\"}\"}],\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\n\t \r", 4);
    st = open_ok(&im);
    ck_assert_uint_eq(tf_safetensors_count(st), 1);
    tf_safetensors_close(st);
    free(im.bytes);
}
END_TEST

START_TEST(test_scalar_and_zero_size)
{
    /* a 0-d scalar, zero-size tensors at the start, between and at the end */
    image im = mkimage("{\"z0\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                       "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                       "\"z1\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[8,8]},"
                       "\"b\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[8,10]},"
                       "\"z2\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[10,10]}}",
                       10);
    tf_safetensors *st = open_ok(&im);
    ck_assert_uint_eq(tf_safetensors_count(st), 5);
    const char *order[] = {"z0", "s", "z1", "b", "z2"};
    for (int i = 0; i < 5; i++) ck_assert_str_eq(tf_safetensors_at(st, (size_t)i)->name, order[i]);
    const tf_st_tensor *s = tf_safetensors_find(st, "s");
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_uint_eq(s->numel, 1);
    ck_assert_uint_eq(s->nbytes, 8);
    const tf_st_tensor *z = tf_safetensors_find(st, "z1");
    ck_assert_uint_eq(z->numel, 0);
    ck_assert_uint_eq(z->nbytes, 0);
    ck_assert_int_eq(z->shape[0], 2);
    ck_assert_int_eq(z->shape[1], 0);
    float f[1];
    tf_error err;
    ck_assert_int_eq(tf_safetensors_copy_f32(st, tf_safetensors_find(st, "z0"), f, 0, &err), TF_OK);
    tf_safetensors_close(st);
    free(im.bytes);
}
END_TEST

START_TEST(test_file_order_and_lookup)
{
    /* header order differs from data order; iteration follows the data */
    image im = mkimage("{\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
                       "\"__metadata__\":{\"z\":\"last\",\"a\":\"first\",\"\":\"empty key\"},"
                       "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                       3);
    tf_safetensors *st = open_ok(&im);
    ck_assert_str_eq(tf_safetensors_at(st, 0)->name, "b");
    ck_assert_str_eq(tf_safetensors_at(st, 1)->name, "a");
    ck_assert_str_eq(tf_safetensors_at(st, 2)->name, "c");
    ck_assert_ptr_eq(tf_safetensors_tensors(st), tf_safetensors_at(st, 0));
    for (size_t i = 0; i < 3; i++) {
        const tf_st_tensor *t = tf_safetensors_at(st, i);
        ck_assert_ptr_eq(tf_safetensors_find(st, t->name), t);
        ck_assert_uint_eq(*(const unsigned char *)t->data, i);
    }
    ck_assert_ptr_null(tf_safetensors_find(st, ""));
    ck_assert_ptr_null(tf_safetensors_find(st, "aa"));
    size_t nm;
    const tf_st_kv *kv = tf_safetensors_metadata(st, &nm);
    ck_assert_uint_eq(nm, 3);
    ck_assert_str_eq(kv[0].key, "");
    ck_assert_str_eq(kv[1].key, "a");
    ck_assert_str_eq(kv[2].key, "z");
    ck_assert_str_eq(tf_safetensors_metadata_get(st, "z"), "last");
    ck_assert_str_eq(tf_safetensors_metadata_get(st, ""), "empty key");
    ck_assert_ptr_null(tf_safetensors_metadata_get(st, "b"));
    tf_safetensors_close(st);
    free(im.bytes);
}
END_TEST

START_TEST(test_many_tensors_lookup)
{
    /* 300 tensors written in reverse name order: binary search must find all */
    enum { N = 300 };
    size_t cap = N * 80 + 16, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(h + len, cap - len, "%s\"t%03d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                                i ? "," : "", N - 1 - i, i, i + 1);
    snprintf(h + len, cap - len, "}");
    image im = mkimage(h, N);
    free(h);
    tf_safetensors *st = open_ok(&im);
    for (int i = 0; i < N; i++) {
        char name[8];
        snprintf(name, sizeof name, "t%03d", i);
        const tf_st_tensor *t = tf_safetensors_find(st, name);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, name);
        ck_assert_uint_eq(t->file_offset - (im.size - N), (unsigned)(N - 1 - i));
    }
    tf_safetensors_close(st);
    free(im.bytes);
}
END_TEST

/* ---- reading: every rejection --------------------------------------------- */

START_TEST(test_reject_lengths)
{
    unsigned char tiny[5] = {1, 2, 3, 4, 5};
    tf_safetensors *st;
    tf_error err;
    ck_assert_int_eq(tf_safetensors_open_memory(tiny, sizeof tiny, "m.safetensors", &st, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "m.safetensors: byte 0: the file is 5 bytes, too short for the 8-byte header length");
    ck_assert_int_eq(tf_safetensors_open_memory(NULL, 0, "m.safetensors", &st, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "the file is 0 bytes"));
    /* the brief's example: a 4 GiB length in a small file */
    image im = mkimage("{}", 1224);
    for (int i = 0; i < 8; i++) im.bytes[i] = 0;
    im.bytes[4] = 1; /* 2^32 */
    ck_assert_int_eq(tf_safetensors_open_memory(im.bytes, im.size, "m.safetensors", &st, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "m.safetensors: byte 0: header length 4294967296 exceeds the file size 1234");
    free(im.bytes);
    /* one byte more than the file holds */
    im = mkimage("{}", 0);
    im.bytes[0] = 3;
    expect_reject_image(im, 0, "header length 3 exceeds the file size 10", NULL);
    /* length 0, and not an object */
    REJECT("", 0, 8, "the header is empty", NULL);
    REJECT(" {}", 0, 8, "starts with byte 0x20, not '{'", NULL);
    REJECT("[]", 0, 8, "starts with byte 0x5b", NULL);
}
END_TEST

START_TEST(test_reject_header_over_limit)
{
    /* a sparse file of 100,000,016 bytes whose header claims 100,000,001:
     * through the mmap path */
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/big.safetensors", tmpdir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    unsigned char len8[8] = {0};
    uint64_t n = TF_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
    ck_assert_int_eq(write(fd, len8, 8), 8);
    ck_assert_int_eq(write(fd, "{", 1), 1);
    ck_assert_int_eq(ftruncate(fd, (off_t)TF_SAFETENSORS_MAX_HEADER + 16), 0);
    close(fd);
    tf_safetensors *st;
    tf_error err;
    ck_assert_int_eq(tf_safetensors_open(path, &st, &err), TF_ERR_DATA);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(err.msg, "big.safetensors: byte 0: header length 100000001 exceeds the limit of 100000000 bytes"));
    remove_tmpdir();
}
END_TEST

START_TEST(test_reject_json)
{
    REJECT("{\"a\":1", 0, -1, "header JSON:", NULL);
    REJECT("{nope}", 0, -1, "header JSON:", "near 'nope'");
    REJECT("{" ENTRY_A "}x", 4, -1, "header JSON:", "end of file expected");
    /* a NUL byte as padding: the package rejects it too */
    expect_reject_image(mkimage_n("{" ENTRY_A "}\0", sizeof("{" ENTRY_A "}"), 4), -1, "header JSON:", NULL);
    /* invalid UTF-8 in a name */
    REJECT("{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, -1, "header JSON:", NULL);
    /* an integer beyond 64 bits */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 4, -1,
           "header JSON:", "too big integer");
    /* duplicate names (jansson keeps the last one silently unless asked) */
    REJECT("{" ENTRY_A ",\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, -1,
           "a tensor name appears twice", "\"a\"");
    /* a \u0000 in a name */
    REJECT("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, -1, "header JSON:", NULL);
}
END_TEST

START_TEST(test_reject_entries)
{
    /* the key "a" is at header byte 1 = file byte 9; "b" after ENTRY_A at 9 + 54 */
    REJECT("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 9, "a tensor has an empty name", NULL);
    REJECT("{\"a\":5}", 0, 9, "tensor 'a': entry is an integer, not an object", NULL);
    REJECT("{\"a\":[]}", 0, 9, "tensor 'a': entry is an array", NULL);
    REJECT("{" ENTRY_A ",\"b\":null}", 4, 9 + (long long)strlen(ENTRY_A) + 1, "tensor 'b': entry is null", NULL);
    REJECT("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 9, "tensor 'a': no \"dtype\"", NULL);
    REJECT("{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 9, "\"dtype\" is an integer, not a string", NULL);
    REJECT("{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 9, "tensor 'a': unknown dtype \"F128\"", NULL);
    REJECT("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 9, "unknown dtype \"f32\"", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, 9, "tensor 'a': no \"shape\"", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, 9, "\"shape\" is an object, not an array", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4, 9, "shape[1] is negative", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, 9, "shape[0] is a real number", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, 9, "shape[0] is a string", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}", 4, 9, "shape[0] is a boolean", NULL);
    /* element count over 64 bits, then the byte count over 64 bits */
    REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,4]}}", 4, 9,
           "shape [4294967296, 4294967296, 2] of U8 overflows", NULL);
    REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", 0, 9,
           "overflows", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4, 9,
           "of F32 overflows 64 bits", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, 9, "tensor 'a': no \"data_offsets\"", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0-4\"}}", 4, 9, "\"data_offsets\" is a string", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", 4, 9, "\"data_offsets\" has 3 items, not 2", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, 9, "has 1 items", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, 9, "data_offsets begin is negative", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4, 9, "data_offsets end is a real number", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, 9,
           "tensor 'a': data_offsets [4, 0) are out of order (begin > end)", NULL);
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20, 9,
           "tensor 'a': data_offsets [0, 20) hold 20 bytes but F32 [2, 3] needs 24", NULL);
    REJECT("{" ENTRY_A "}", 3, 9, "tensor 'a': data_offsets [0, 4) end past the data, which is 3 bytes", NULL);
}
END_TEST

START_TEST(test_reject_layout)
{
    /* data starts at 8 + header length: offsets in messages are file bytes */
    const char *ov = "{\"bert.pooler.dense.weight\":{\"dtype\":\"F32\",\"shape\":[256],\"data_offsets\":[1024,2048]},"
                     "\"bert.pooler.dense.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2000,2004]},"
                     "\"x\":{\"dtype\":\"U8\",\"shape\":[1024],\"data_offsets\":[0,1024]}}";
    long long d0 = 8 + (long long)strlen(ov);
    REJECT(ov, 2048, d0 + 2000,
           "tensor 'bert.pooler.dense.bias': data_offsets [2000, 2004) overlap tensor 'bert.pooler.dense.weight' [1024, 2048)",
           NULL);
    /* the same range twice */
    const char *same = "{\"p\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                       "\"q\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    REJECT(same, 4, 8 + (long long)strlen(same), "tensor 'q': data_offsets [0, 4) overlap tensor 'p' [0, 4)", NULL);
    /* a zero-size tensor inside another one is an overlap (the package rejects it) */
    const char *inside = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                         "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}";
    REJECT(inside, 8, 8 + (long long)strlen(inside) + 4, "tensor 'z': data_offsets [4, 4) overlap tensor 'a' [0, 8)", NULL);
    /* a hole between two tensors, at the start, and trailing bytes */
    const char *hole = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    REJECT(hole, 12, 8 + (long long)strlen(hole) + 4, "data bytes [4, 8) belong to no tensor (a hole before tensor 'b' [8, 12))", NULL);
    const char *lead = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    REJECT(lead, 8, 8 + (long long)strlen(lead), "data bytes [0, 4) belong to no tensor", NULL);
    REJECT("{" ENTRY_A "}", 5, 8 + (long long)strlen("{" ENTRY_A "}") + 4,
           "the tensors end at data byte 4 but the data runs to 5", "1 trailing bytes");
    REJECT("{}", 3, 10, "the tensors end at data byte 0 but the data runs to 3", NULL);
    /* a zero-size tensor past the end */
    REJECT("{\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[9,9]}}", 8, -1, "end past the data", NULL);
}
END_TEST

START_TEST(test_reject_metadata)
{
    REJECT("{\"__metadata__\":\"pt\"}", 0, 9, "__metadata__ is a string, not an object of strings", NULL);
    REJECT("{\"__metadata__\":null}", 0, 9, "__metadata__ is null", NULL);
    REJECT("{\"__metadata__\":[\"a\"]}", 0, 9, "__metadata__ is an array", NULL);
    REJECT("{" ENTRY_A ",\"__metadata__\":{\"format\":\"pt\",\"n\":1}}", 4, 9 + (long long)strlen(ENTRY_A) + 1,
           "__metadata__ key 'n' has an integer value, not a string", NULL);
    REJECT("{\"__metadata__\":{\"k\":{\"a\":\"b\"}}}", 0, 9, "key 'k' has an object value", NULL);
}
END_TEST

START_TEST(test_long_name_message)
{
    /* a huge name is cut in the message, which stays one line under the limit */
    size_t n = 5000;
    char *h = malloc(n + 64);
    strcpy(h, "{\"");
    memset(h + 2, 'n', n);
    strcpy(h + 2 + n, "\":{\"dtype\":\"X\"}}");
    tf_safetensors *st;
    tf_error err;
    image im = mkimage(h, 0);
    ck_assert_int_eq(tf_safetensors_open_memory(im.bytes, im.size, "m.safetensors", &st, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "nnn...': unknown dtype \"X\""));
    ck_assert_uint_lt(strlen(err.msg), 400);
    free(im.bytes);
    free(h);
}
END_TEST

START_TEST(test_open_path_errors)
{
    make_tmpdir();
    tf_safetensors *st = (tf_safetensors *)1;
    tf_error err;
    char path[128];
    snprintf(path, sizeof path, "%s/missing.safetensors", tmpdir);
    ck_assert_int_eq(tf_safetensors_open(path, &st, &err), TF_ERR_DATA);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(err.msg, "missing.safetensors: cannot open: No such file or directory"));
    ck_assert_int_eq(tf_safetensors_open(tmpdir, &st, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, ": not a regular file"));
    snprintf(path, sizeof path, "%s/zero.safetensors", tmpdir);
    write_file(path, "", 0);
    ck_assert_int_eq(tf_safetensors_open(path, &st, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "zero.safetensors: byte 0: the file is 0 bytes"));
    /* a bad file through the mmap path */
    snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
    image im = mkimage("{" ENTRY_A "}", 5);
    write_file(path, im.bytes, im.size);
    free(im.bytes);
    ck_assert_int_eq(tf_safetensors_open(path, &st, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "bad.safetensors: byte "));
    ck_assert_int_eq(tf_safetensors_open(NULL, &st, &err), TF_ERR_USAGE);
    ck_assert_int_eq(tf_safetensors_open(path, NULL, &err), TF_ERR_USAGE);
    ck_assert_int_eq(tf_safetensors_open_memory("x", 1, "m", NULL, &err), TF_ERR_USAGE);
    ck_assert_int_eq(tf_safetensors_open_memory(NULL, 9, "m", &st, &err), TF_ERR_USAGE);
    remove_tmpdir();
}
END_TEST

/* ---- f32 conversion -------------------------------------------------------- */

START_TEST(test_f32_from_fixture)
{
    tf_safetensors *st;
    tf_error err;
    ck_assert_msg(tf_safetensors_open(fixture_path(), &st, &err) == TF_OK, "%s", err.msg);
    float v[6];
    int64_t s23[] = {2, 3}, s3[] = {3}, s22[] = {2, 2}, s4[] = {4};
    ck_assert_int_eq(tf_safetensors_load_f32(st, "f32", 2, s23, v, &err), TF_OK);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(v[i], i * 0.25f - 0.5f);
    ck_assert_int_eq(tf_safetensors_load_f32(st, "f64", 1, s3, v, &err), TF_OK);
    ck_assert_float_eq(v[0], 0.1f); /* rounded to nearest from the double */
    ck_assert_float_eq(v[1], -2.5f);
    ck_assert(isinf(v[2]) && v[2] > 0); /* 1e300 overflows to +inf */
    ck_assert_int_eq(tf_safetensors_load_f32(st, "f16", 2, s22, v, &err), TF_OK);
    ck_assert_float_eq(v[0], 0.5f);
    ck_assert_float_eq(v[1], -1.0f);
    ck_assert_float_eq(v[2], 65504.0f);
    ck_assert_float_eq(v[3], ldexpf(1.0f, -24)); /* the smallest subnormal */
    ck_assert_int_eq(tf_safetensors_load_f32(st, "bf16", 1, s4, v, &err), TF_OK);
    ck_assert_float_eq(v[0], 1.5f);
    ck_assert_float_eq(v[1], -2.25f);
    ck_assert_float_eq(v[2], 0.0f);
    ck_assert_float_eq(v[3], 65280.0f);
    ck_assert_int_eq(tf_safetensors_load_f32(st, "scalar", 0, NULL, v, &err), TF_OK);
    ck_assert_float_eq(v[0], 3.25f);

    /* errors: missing, other shape, other count, a dtype that is not a float */
    ck_assert_int_eq(tf_safetensors_load_f32(st, "nope", 1, s3, v, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "torch_mixed.safetensors: no tensor named 'nope' (the file has 12 tensors)"));
    int64_t s32[] = {3, 2};
    ck_assert_int_eq(tf_safetensors_load_f32(st, "f32", 2, s32, v, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "tensor 'f32': shape [2, 3], but [3, 2] was expected"));
    ck_assert_int_eq(tf_safetensors_load_f32(st, "f32", 1, s3, v, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "shape [2, 3], but [3] was expected"));
    const tf_st_tensor *t = tf_safetensors_find(st, "f32");
    ck_assert_int_eq(tf_safetensors_copy_f32(st, t, v, 5, &err), TF_ERR_DATA);
    char want[128];
    snprintf(want, sizeof want, "byte %llu: tensor 'f32': shape [2, 3] (6 elements) does not match the buffer's shape [5] (5 elements)",
             (unsigned long long)t->file_offset);
    ck_assert_msg(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
    ck_assert_int_eq(tf_safetensors_load_f32(st, "i32", 1, s3, v, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "tensor 'i32': dtype I32 cannot be read as F32"));
    tf_safetensors_close(st);
}
END_TEST

START_TEST(test_f32_misaligned)
{
    /* header length 163: data starts at file byte 171, so nothing is aligned;
     * the conversions must go through memcpy (UBSan checks this in the fuzzer) */
    const char *h = "{\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[12,16]},"
                    "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[4,12]}}";
    image im = mkimage(h, 16);
    ck_assert_uint_eq((8 + strlen(h)) % 2, 1);
    float one = 1.5f, d2f;
    double two = -3.25;
    unsigned char *data = im.bytes + 8 + strlen(h);
    memcpy(data, &one, 4);
    memcpy(data + 4, &two, 8);
    data[12] = 0x00, data[13] = 0x3c; /* f16 1.0 */
    data[14] = 0x00, data[15] = 0xc0; /* f16 -2.0 */
    tf_safetensors *st = open_ok(&im);
    float v[2];
    tf_error err;
    ck_assert_int_eq(tf_safetensors_copy_f32(st, tf_safetensors_find(st, "f"), v, 1, &err), TF_OK);
    ck_assert_float_eq(v[0], 1.5f);
    ck_assert_int_eq(tf_safetensors_copy_f32(st, tf_safetensors_find(st, "d"), &d2f, 1, &err), TF_OK);
    ck_assert_float_eq(d2f, -3.25f);
    ck_assert_int_eq(tf_safetensors_copy_f32(st, tf_safetensors_find(st, "h"), v, 2, &err), TF_OK);
    ck_assert_float_eq(v[0], 1.0f);
    ck_assert_float_eq(v[1], -2.0f);
    tf_safetensors_close(st);
    free(im.bytes);
}
END_TEST

/* ---- the package's file ----------------------------------------------------- */

START_TEST(test_fixture_values_and_identity)
{
    size_t fsize;
    unsigned char *fbytes = read_file(fixture_path(), &fsize);
    ck_assert_msg(fbytes != NULL, "cannot read %s", fixture_path());
    tf_safetensors *st;
    tf_error err;
    ck_assert_msg(tf_safetensors_open(fixture_path(), &st, &err) == TF_OK, "%s", err.msg);
    const char *order[] = {"i64", "f64", "empty", "f32", "scalar", "i32", "bf16", "f16", "i16", "i8", "u8", "bool"};
    ck_assert_uint_eq(tf_safetensors_count(st), 12);
    for (size_t i = 0; i < 12; i++) ck_assert_str_eq(tf_safetensors_at(st, i)->name, order[i]);
    ck_assert_str_eq(tf_safetensors_metadata_get(st, "format"), "pt");
    const tf_st_tensor *t = tf_safetensors_find(st, "i64");
    int64_t i64[2];
    memcpy(i64, t->data, sizeof i64);
    ck_assert_int_eq(i64[0], -1);
    ck_assert_int_eq(i64[1], (int64_t)1 << 40);
    t = tf_safetensors_find(st, "u8");
    ck_assert_int_eq(t->dtype, TF_DTYPE_U8);
    ck_assert_mem_eq(t->data, "\x00\xff\x80", 3);
    t = tf_safetensors_find(st, "bool");
    ck_assert_int_eq(t->dtype, TF_DTYPE_BOOL);
    ck_assert_mem_eq(t->data, "\x01\x00\x01", 3);
    t = tf_safetensors_find(st, "i8");
    ck_assert_mem_eq(t->data, "\x80\x7f", 2);
    t = tf_safetensors_find(st, "empty");
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 0);
    ck_assert_int_eq(t->shape[1], 3);
    /* the package wrote every tensor aligned to its element size */
    for (size_t i = 0; i < 12; i++) {
        t = tf_safetensors_at(st, i);
        ck_assert_uint_eq(t->file_offset % tf_dtype_size(t->dtype), 0);
    }
    /* tfcore's writer reproduces the package's bytes exactly */
    size_t nm;
    const tf_st_kv *kv = tf_safetensors_metadata(st, &nm);
    unsigned char *out;
    size_t out_size;
    ck_assert_int_eq(tf_safetensors_serialize(tf_safetensors_tensors(st), 12, kv, nm, &out, &out_size, &err), TF_OK);
    ck_assert_uint_eq(out_size, fsize);
    ck_assert_mem_eq(out, fbytes, fsize);
    free(out);
    /* whatever order the tensors are given in */
    tf_st_tensor rev[12];
    for (size_t i = 0; i < 12; i++) rev[i] = tf_safetensors_tensors(st)[11 - i];
    ck_assert_int_eq(tf_safetensors_serialize(rev, 12, kv, nm, &out, &out_size, &err), TF_OK);
    ck_assert_uint_eq(out_size, fsize);
    ck_assert_mem_eq(out, fbytes, fsize);
    free(out);
    tf_safetensors_close(st);
    free(fbytes);
}
END_TEST

/* ---- writing ------------------------------------------------------------------ */

START_TEST(test_round_trip_all_dtypes)
{
    enum { NT = TF_DTYPE_COUNT + 4 };
    tf_st_tensor ts[NT];
    char names[NT][16];
    static unsigned char payload[NT][64];
    int64_t s23[] = {2, 3}, s0[] = {0}, s402[] = {4, 0, 2}, s1[] = {1};
    size_t k = 0;
    for (int dt = 0; dt < TF_DTYPE_COUNT; dt++, k++) {
        snprintf(names[k], sizeof names[k], "t_%s", tf_dtype_name((tf_dtype)dt));
        ts[k] = (tf_st_tensor){.name = names[k], .dtype = (tf_dtype)dt, .ndim = 2, .shape = s23, .data = payload[k]};
    }
    ts[k] = (tf_st_tensor){.name = "scalar_bool", .dtype = TF_DTYPE_BOOL, .ndim = 0, .shape = NULL, .data = payload[k]};
    k++;
    ts[k] = (tf_st_tensor){.name = "zero_u8", .dtype = TF_DTYPE_U8, .ndim = 1, .shape = s0, .data = NULL};
    k++;
    ts[k] = (tf_st_tensor){.name = "zero_f16", .dtype = TF_DTYPE_F16, .ndim = 3, .shape = s402, .data = NULL};
    k++;
    ts[k] = (tf_st_tensor){.name = "one_u64", .dtype = TF_DTYPE_U64, .ndim = 1, .shape = s1, .data = payload[k]};
    k++;
    ck_assert_uint_eq(k, NT);
    for (size_t i = 0; i < NT; i++)
        for (size_t j = 0; j < 64; j++) payload[i][j] = (unsigned char)(i * 31 + j * 7);
    payload[TF_DTYPE_COUNT][0] = 1; /* the scalar bool */
    tf_st_kv meta[] = {{"format", "pt"}, {"note", "é \"q\"\n\x01"}};

    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
    tf_error err;
    ck_assert_msg(tf_safetensors_write(path, ts, NT, meta, 2, &err) == TF_OK, "%s", err.msg);
    ck_assert_int_eq(count_temp_files(), 0);
    unsigned char *mem;
    size_t mem_size;
    ck_assert_int_eq(tf_safetensors_serialize(ts, NT, meta, 2, &mem, &mem_size, &err), TF_OK);
    size_t fsize;
    unsigned char *fbytes = read_file(path, &fsize);
    ck_assert_uint_eq(fsize, mem_size);
    ck_assert_mem_eq(fbytes, mem, fsize); /* the file is the serialized image */
    free(fbytes);

    for (int pass = 0; pass < 2; pass++) {
        tf_safetensors *st;
        tf_status rc = pass ? tf_safetensors_open(path, &st, &err)
                            : tf_safetensors_open_memory(mem, mem_size, "mem", &st, &err);
        ck_assert_msg(rc == TF_OK, "%s", err.msg);
        ck_assert_uint_eq(tf_safetensors_count(st), NT);
        ck_assert_str_eq(tf_safetensors_metadata_get(st, "note"), meta[1].value);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | mem[i];
        ck_assert_uint_eq(hlen % 8, 0);
        int last_rank_size = 8;
        for (size_t i = 0; i < NT; i++) {
            const tf_st_tensor *in = &ts[i], *out = tf_safetensors_find(st, in->name);
            ck_assert_ptr_nonnull(out);
            ck_assert_int_eq(out->dtype, in->dtype);
            ck_assert_int_eq(out->ndim, in->ndim);
            for (int d = 0; d < in->ndim; d++) ck_assert_int_eq(out->shape[d], in->shape[d]);
            if (out->nbytes) ck_assert_mem_eq(out->data, in->data, out->nbytes);
            ck_assert_uint_eq(out->file_offset % tf_dtype_size(out->dtype), 0); /* aligned */
            /* file order: element sizes never grow */
            int sz = (int)tf_dtype_size(tf_safetensors_at(st, i)->dtype);
            ck_assert_int_le(sz, last_rank_size);
            last_rank_size = sz;
        }
        tf_safetensors_close(st);
    }
    free(mem);
    remove_tmpdir();
}
END_TEST

START_TEST(test_header_bytes_like_the_package)
{
    /* what safetensors 0.4.5 wrote for the same input (checked by hand with
     * safetensors.numpy.save): serde_json's escapes, lowercase \u00xx, raw
     * UTF-8 and DEL, "__metadata__" first, space padding to 8 */
    tf_st_tensor t = {.name = "a\x01\b\f\x1f\x7f\"\\/\xc3\xa9", .dtype = TF_DTYPE_U8, .ndim = 1,
                      .shape = (int64_t[]){1}, .data = "\x2a"};
    tf_st_kv kv = {"k\n", "v\t\xc3\xa9"};
    const char *want = "{\"__metadata__\":{\"k\\n\":\"v\\t\xc3\xa9\"},"
                       "\"a\\u0001\\b\\f\\u001f\x7f\\\"\\\\/\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    unsigned char *out;
    size_t n;
    tf_error err;
    ck_assert_int_eq(tf_safetensors_serialize(&t, 1, &kv, 1, &out, &n, &err), TF_OK);
    size_t wl = strlen(want), padded = (wl + 7) / 8 * 8;
    ck_assert_uint_eq(out[0], padded);
    ck_assert_mem_eq(out + 8, want, wl);
    for (size_t i = wl; i < padded; i++) ck_assert_uint_eq(out[8 + i], ' ');
    ck_assert_uint_eq(n, 8 + padded + 1);
    ck_assert_uint_eq(out[n - 1], 0x2a);
    /* and tfcore reads its own escapes back */
    tf_safetensors *st;
    ck_assert_int_eq(tf_safetensors_open_memory(out, n, "x", &st, &err), TF_OK);
    ck_assert_ptr_nonnull(tf_safetensors_find(st, t.name));
    ck_assert_str_eq(tf_safetensors_metadata_get(st, "k\n"), kv.value);
    tf_safetensors_close(st);
    free(out);
    /* no tensors, no metadata: the package's 16 bytes */
    ck_assert_int_eq(tf_safetensors_serialize(NULL, 0, NULL, 0, &out, &n, &err), TF_OK);
    ck_assert_uint_eq(n, 16);
    ck_assert_mem_eq(out, "\x08\0\0\0\0\0\0\0{}      ", 16);
    free(out);
    /* metadata keys sorted (the package's order is a hash map's) */
    tf_st_kv two[] = {{"z", "1"}, {"a", "2"}};
    ck_assert_int_eq(tf_safetensors_serialize(NULL, 0, two, 2, &out, &n, &err), TF_OK);
    const char *sorted = "{\"__metadata__\":{\"a\":\"2\",\"z\":\"1\"}}";
    ck_assert_mem_eq(out + 8, sorted, strlen(sorted));
    free(out);
}
END_TEST

/* Serialize ts[n] + meta[nm] and expect rejection with `code` and fragment. */
static void expect_write_error(const tf_st_tensor *ts, size_t n, const tf_st_kv *meta, size_t nm, tf_status code,
                               const char *frag)
{
    unsigned char *out = (unsigned char *)1;
    size_t size = 1;
    tf_error err = {0};
    ck_assert_int_eq(tf_safetensors_serialize(ts, n, meta, nm, &out, &size, &err), code);
    ck_assert_ptr_null(out);
    ck_assert_uint_eq(size, 0);
    ck_assert_msg(strstr(err.msg, frag), "message '%s' lacks '%s'", err.msg, frag);
    ck_assert_msg(!strchr(err.msg, '\n'), "newline in '%s'", err.msg);
}

START_TEST(test_write_rejects_bad_input)
{
    int64_t s1[] = {1}, sneg[] = {-2}, sbig[] = {INT64_MAX, 4}, shuge[] = {INT64_MAX};
    const char *d = "abcdefgh";
    tf_st_tensor ok = {.name = "a", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = s1, .data = d};
    tf_st_tensor t;
    t = ok, t.name = NULL;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "safetensors: tensor 0 has no name");
    t = ok, t.name = "";
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "tensor 0 has no name");
    t = ok, t.name = "bad\xff";
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "name 'bad\xff' is not valid UTF-8");
    t = ok, t.name = "\xed\xa0\x80"; /* a UTF-16 surrogate */
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "is not valid UTF-8");
    t = ok, t.name = "__metadata__";
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "reserved for the metadata");
    t = ok, t.dtype = (tf_dtype)99;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "tensor 'a': unknown dtype value 99");
    t = ok, t.ndim = -1;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "ndim -1");
    t = ok, t.shape = NULL;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "ndim 1 with a NULL shape");
    t = ok, t.shape = sneg;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "shape[0] is -2");
    t = ok, t.ndim = 2, t.shape = sbig;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "byte count overflows");
    t = ok, t.data = NULL;
    expect_write_error(&t, 1, NULL, 0, TF_ERR_DATA, "4 bytes but data is NULL");
    tf_st_tensor two[3] = {ok, ok, ok};
    two[1].name = "b";
    expect_write_error(two, 3, NULL, 0, TF_ERR_DATA, "tensor 'a' is given twice (entries 0 and 2)");
    /* two tensors of 2^63 - 1 bytes: the file size overflows (nothing is read) */
    tf_st_tensor huge[2] = {{.name = "h1", .dtype = TF_DTYPE_U8, .ndim = 1, .shape = shuge, .data = d},
                            {.name = "h2", .dtype = TF_DTYPE_U8, .ndim = 1, .shape = shuge, .data = d}};
    expect_write_error(huge, 2, NULL, 0, TF_ERR_DATA, "the file size overflows");
    tf_st_tensor huge3[3] = {huge[0], huge[1], huge[0]};
    huge3[2].name = "h3";
    expect_write_error(huge3, 3, NULL, 0, TF_ERR_DATA, "the tensors' total size overflows");
    /* metadata */
    tf_st_kv m[2] = {{"k", "v"}, {"k", "w"}};
    expect_write_error(&ok, 1, m, 2, TF_ERR_DATA, "metadata key 'k' is given twice (entries 0 and 1)");
    tf_st_kv mk = {NULL, "v"}, mv = {"k", NULL}, mu = {"k", "\xc3"}, mku = {"\xc0\x80", "v"};
    expect_write_error(&ok, 1, &mk, 1, TF_ERR_DATA, "metadata entry 0 has a NULL key");
    expect_write_error(&ok, 1, &mv, 1, TF_ERR_DATA, "metadata entry 0 has a NULL value");
    expect_write_error(&ok, 1, &mu, 1, TF_ERR_DATA, "metadata entry 0 ('k'): value is not valid UTF-8");
    expect_write_error(&ok, 1, &mku, 1, TF_ERR_DATA, "key is not valid UTF-8");
    /* NULL arrays with a count */
    expect_write_error(NULL, 1, NULL, 0, TF_ERR_USAGE, "1 tensors but the array is NULL");
    expect_write_error(&ok, 1, NULL, 1, TF_ERR_USAGE, "1 metadata entries but the array is NULL");
    tf_error err;
    size_t size;
    ck_assert_int_eq(tf_safetensors_serialize(&ok, 1, NULL, 0, NULL, &size, &err), TF_ERR_USAGE);
    ck_assert_int_eq(tf_safetensors_write(NULL, &ok, 1, NULL, 0, &err), TF_ERR_USAGE);
    ck_assert_int_eq(tf_safetensors_write("", &ok, 1, NULL, 0, &err), TF_ERR_USAGE);
}
END_TEST

START_TEST(test_write_rejects_huge_header)
{
    /* a metadata value that makes the header pass the format's 100 MB limit */
    size_t n = TF_SAFETENSORS_MAX_HEADER;
    char *v = malloc(n + 1);
    ck_assert_ptr_nonnull(v);
    memset(v, 'v', n);
    v[n] = 0;
    tf_st_kv kv = {"k", v};
    expect_write_error(NULL, 0, &kv, 1, TF_ERR_DATA, "over the format's limit of 100000000");
    free(v);
}
END_TEST

/* A file at `path` holding "old", and the tensors written over it. */
static const int64_t w_shape[] = {1024};
static unsigned char w_data[4096];
static const tf_st_tensor w_tensor = {.name = "w", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = w_shape, .data = w_data};

static void assert_old_intact(const char *path)
{
    size_t n;
    unsigned char *p = read_file(path, &n);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(n, 3);
    ck_assert_mem_eq(p, "old", 3);
    free(p);
    ck_assert_int_eq(count_temp_files(), 0);
}

START_TEST(test_write_replaces_atomically)
{
    make_tmpdir();
    char path[128], tmp[160];
    snprintf(path, sizeof path, "%s/m.safetensors", tmpdir);
    write_file(path, "old", 3);
    /* a stale temp file of ours (same pid) is replaced, not written through */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    write_file(tmp, "stale", 5);
    tf_error err;
    ck_assert_msg(tf_safetensors_write(path, &w_tensor, 1, NULL, 0, &err) == TF_OK, "%s", err.msg);
    ck_assert_int_eq(count_temp_files(), 0);
    tf_safetensors *st;
    ck_assert_int_eq(tf_safetensors_open(path, &st, &err), TF_OK);
    ck_assert_uint_eq(tf_safetensors_find(st, "w")->nbytes, 4096);
    tf_safetensors_close(st);
    /* a relative path (directory ".") */
    ck_assert_int_eq(chdir(tmpdir), 0);
    ck_assert_msg(tf_safetensors_write("rel.safetensors", &w_tensor, 1, NULL, 0, &err) == TF_OK, "%s", err.msg);
    ck_assert_int_eq(access("rel.safetensors", R_OK), 0);
    remove_tmpdir();
}
END_TEST

START_TEST(test_write_failures_keep_old_file)
{
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/m.safetensors", tmpdir);
    write_file(path, "old", 3);
    tf_error err;
    tf_st_tensor bad = w_tensor;
    bad.dtype = (tf_dtype)-1;
    /* bad input: nothing is created */
    ck_assert_int_eq(tf_safetensors_write(path, &bad, 1, NULL, 0, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "m.safetensors: tensor 'w': unknown dtype value -1"));
    assert_old_intact(path);
    /* the temp file cannot be created (missing directory) */
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/none/m.safetensors", tmpdir);
    ck_assert_int_eq(tf_safetensors_write(nodir, &w_tensor, 1, NULL, 0, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot create"));
    ck_assert_ptr_nonnull(strstr(err.msg, "No such file or directory"));
    /* fsync of the file fails */
    fail_fsync_file = 1;
    ck_assert_int_eq(tf_safetensors_write(path, &w_tensor, 1, NULL, 0, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "m.safetensors: flushing"));
    ck_assert_ptr_nonnull(strstr(err.msg, "Input/output error"));
    fail_fsync_file = 0;
    assert_old_intact(path);
    /* the target is a folder: refused before any temporary file (a failing
     * rename itself is tests/test_file.c's) */
    char dirpath[160], inner[200];
    snprintf(dirpath, sizeof dirpath, "%s/d.safetensors", tmpdir);
    ck_assert_int_eq(mkdir(dirpath, 0755), 0);
    snprintf(inner, sizeof inner, "%s/keep", dirpath);
    write_file(inner, "x", 1);
    ck_assert_int_eq(tf_safetensors_write(dirpath, &w_tensor, 1, NULL, 0, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "it is a folder; not replacing it"));
    ck_assert_int_eq(count_temp_files(), 0);
    ck_assert_int_eq(access(inner, R_OK), 0);
    /* a write fails part-way: the file size limit is below the tensor */
    /* (72 = 8 + the 64-byte padded header: the data write fails) */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1000;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    tf_status rc = tf_safetensors_write(path, &w_tensor, 1, NULL, 0, &err);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    ck_assert_int_eq(rc, TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "failed at byte 72: File too large"), "%s", err.msg);
    assert_old_intact(path);
    remove_tmpdir();
}
END_TEST

START_TEST(test_write_dir_sync_failure)
{
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/m.safetensors", tmpdir);
    tf_error err;
    fail_fsync_dir = 1;
    ck_assert_int_eq(tf_safetensors_write(path, &w_tensor, 1, NULL, 0, &err), TF_ERR_RUNTIME);
    fail_fsync_dir = 0;
    ck_assert_ptr_nonnull(strstr(err.msg, "m.safetensors: written, but flushing its directory failed"));
    /* the file itself is complete */
    tf_safetensors *st;
    ck_assert_int_eq(tf_safetensors_open(path, &st, &err), TF_OK);
    tf_safetensors_close(st);
    ck_assert_int_eq(count_temp_files(), 0);
    remove_tmpdir();
}
END_TEST

/* ---- a folder's weights: one file or shards with an index ------------------- */

static const int64_t set_shape[] = {2};
static const float set_vals[3][2] = {{1, 2}, {3, 4}, {5, 6}};

/* tmpdir/FILE holding the tensors named in names (values set_vals[i]) */
static void write_shard(const char *file, const char *const *names, const int *vals, size_t n)
{
    tf_st_tensor t[3];
    for (size_t i = 0; i < n; i++)
        t[i] = (tf_st_tensor){.name = names[i], .dtype = TF_DTYPE_F32, .ndim = 1, .shape = set_shape,
                              .data = set_vals[vals[i]]};
    char path[160];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    tf_error err;
    ck_assert_msg(tf_safetensors_write(path, t, n, NULL, 0, &err) == TF_OK, "%s", err.msg);
}

static const char *fmt_tmp(const char *file)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    return path;
}

static void write_index(const char *json)
{
    char path[160];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", tmpdir);
    write_file(path, json, strlen(json));
}

/* Shards as transformers writes them: a and b in shard 1, c in shard 2. */
static void write_good_shards(void)
{
    write_shard("model-00001-of-00002.safetensors", (const char *[]){"a", "b"}, (const int[]){0, 1}, 2);
    write_shard("model-00002-of-00002.safetensors", (const char *[]){"c"}, (const int[]){2}, 1);
}
#define GOOD_MAP "\"a\": \"model-00001-of-00002.safetensors\", \"b\": \"model-00001-of-00002.safetensors\", " \
                 "\"c\": \"model-00002-of-00002.safetensors\""

static void expect_set_error(const char *frag1, const char *frag2)
{
    tf_safetensors_set *set = (tf_safetensors_set *)1;
    tf_error err = {0};
    ck_assert_int_eq(tf_safetensors_set_open(tmpdir, "model.safetensors", &set, &err), TF_ERR_DATA);
    ck_assert_ptr_null(set);
    ck_assert_msg(strstr(err.msg, frag1), "message '%s' lacks '%s'", err.msg, frag1);
    if (frag2) ck_assert_msg(strstr(err.msg, frag2), "message '%s' lacks '%s'", err.msg, frag2);
    ck_assert_msg(strstr(err.msg, "model.safetensors"), "message '%s' names no file", err.msg);
    ck_assert(!strchr(err.msg, '\n'));
}

START_TEST(test_set_single_and_sharded)
{
    make_tmpdir();
    tf_safetensors_set *set;
    tf_error err;
    /* neither file */
    expect_set_error("model.safetensors: No such file or directory", NULL);
    /* sharded: every tensor once, shards in name order, values from the right file */
    write_good_shards();
    write_index("{\"metadata\": {\"total_size\": 24}, \"weight_map\": {" GOOD_MAP "}}");
    ck_assert_msg(tf_safetensors_set_open(tmpdir, "model.safetensors", &set, &err) == TF_OK, "%s", err.msg);
    ck_assert_uint_eq(tf_safetensors_set_count(set), 3);
    ck_assert_ptr_nonnull(strstr(tf_safetensors_set_path(set), "model.safetensors.index.json"));
    const char *want[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        const tf_safetensors *file;
        const tf_st_tensor *t = tf_safetensors_set_at(set, i, &file);
        ck_assert_str_eq(t->name, want[i]);
        ck_assert_ptr_nonnull(strstr(tf_safetensors_path(file), i < 2 ? "model-00001" : "model-00002"));
        float v[2];
        ck_assert_int_eq(tf_safetensors_copy_f32(file, t, v, 2, &err), TF_OK);
        ck_assert(v[0] == set_vals[i][0] && v[1] == set_vals[i][1]);
    }
    ck_assert_ptr_null(tf_safetensors_set_at(set, 3, NULL));
    tf_safetensors_set_close(set);
    /* a single model.safetensors wins over an index, as in transformers */
    write_shard("model.safetensors", (const char *[]){"z"}, (const int[]){0}, 1);
    ck_assert_int_eq(tf_safetensors_set_open(tmpdir, "model.safetensors", &set, &err), TF_OK);
    ck_assert_uint_eq(tf_safetensors_set_count(set), 1);
    ck_assert_str_eq(tf_safetensors_set_at(set, 0, NULL)->name, "z");
    tf_safetensors_set_close(set);
    remove_tmpdir();
}
END_TEST

START_TEST(test_set_rejects_bad_index)
{
    make_tmpdir();
    write_good_shards();
    /* a missing shard */
    write_index("{\"weight_map\": {" GOOD_MAP ", \"d\": \"model-00003-of-00003.safetensors\"}}");
    expect_set_error("index.json: shard 'model-00003-of-00003.safetensors': ", "No such file or directory");
    /* a tensor in two shards */
    write_shard("model-00002-of-00002.safetensors", (const char *[]){"b", "c"}, (const int[]){1, 2}, 2);
    write_index("{\"weight_map\": {" GOOD_MAP "}}");
    expect_set_error("tensor 'b' is in shard 'model-00002-of-00002.safetensors', but the weight_map puts it in "
                     "'model-00001-of-00002.safetensors'",
                     "one shard only");
    write_good_shards();
    /* paths leading out of the folder */
    const char *escape[] = {"../model-00002-of-00002.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""};
    for (size_t i = 0; i < sizeof escape / sizeof escape[0]; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"b\": "
                 "\"model-00001-of-00002.safetensors\", \"c\": \"%s\"}}",
                 escape[i]);
        write_index(json);
        expect_set_error("weight_map['c'] = '", "a shard must be a file name in the model's folder");
    }
    /* a tensor of a shard the index does not list, one it lists that is not there, a repeated key */
    write_index("{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                "\"c\": \"model-00002-of-00002.safetensors\"}}");
    expect_set_error("tensor 'b' of shard 'model-00001-of-00002.safetensors' is not in the weight_map", NULL);
    write_index("{\"weight_map\": {" GOOD_MAP ", \"e\": \"model-00002-of-00002.safetensors\"}}");
    expect_set_error("the weight_map puts tensor 'e' in shard 'model-00002-of-00002.safetensors', which does not hold it",
                     NULL);
    write_index("{\"weight_map\": {" GOOD_MAP ", \"a\": \"model-00001-of-00002.safetensors\"}}");
    expect_set_error("index.json:1:", "duplicate");
    /* malformed index files */
    write_index("{\"weight_map\": [1]}");
    expect_set_error("index.json: no \"weight_map\" object", NULL);
    write_index("{\"weight_map\": {\"a\": 7}}");
    expect_set_error("weight_map['a'] is not a string", NULL);
    write_index("{\"weight_map\": {");
    expect_set_error("index.json:1:", NULL);
    /* a bad shard: its own one line, prefixed by the index */
    write_file(fmt_tmp("model-00002-of-00002.safetensors"), "xx", 2);
    write_index("{\"weight_map\": {" GOOD_MAP "}}");
    expect_set_error("index.json: shard 'model-00002-of-00002.safetensors': ", "byte 0");
    remove_tmpdir();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *r = tcase_create("read");
    tcase_add_test(r, test_minimal);
    tcase_add_test(r, test_empty_file_and_padding);
    tcase_add_test(r, test_scalar_and_zero_size);
    tcase_add_test(r, test_file_order_and_lookup);
    tcase_add_test(r, test_many_tensors_lookup);
    tcase_add_test(r, test_reject_lengths);
    tcase_add_test(r, test_reject_header_over_limit);
    tcase_add_test(r, test_reject_json);
    tcase_add_test(r, test_reject_entries);
    tcase_add_test(r, test_reject_layout);
    tcase_add_test(r, test_reject_metadata);
    tcase_add_test(r, test_long_name_message);
    tcase_add_test(r, test_open_path_errors);
    tcase_add_test(r, test_f32_from_fixture);
    tcase_add_test(r, test_f32_misaligned);
    tcase_add_test(r, test_fixture_values_and_identity);
    tcase_add_test(r, test_set_single_and_sharded);
    tcase_add_test(r, test_set_rejects_bad_index);
    suite_add_tcase(s, r);
    TCase *w = tcase_create("write");
    tcase_add_test(w, test_round_trip_all_dtypes);
    tcase_add_test(w, test_header_bytes_like_the_package);
    tcase_add_test(w, test_write_rejects_bad_input);
    tcase_add_test(w, test_write_rejects_huge_header);
    tcase_add_test(w, test_write_replaces_atomically);
    tcase_add_test(w, test_write_failures_keep_old_file);
    tcase_add_test(w, test_write_dir_sync_failure);
    suite_add_tcase(s, w);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

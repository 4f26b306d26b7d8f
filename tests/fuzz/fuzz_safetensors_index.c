/* fuzz_safetensors_index.c — libFuzzer target for the sharded-weights index
 * (core/sdk/safetensors_set.c): any bytes as model.safetensors.index.json in
 * a folder holding two good shards (a, b in model-00001-of-00002, c in
 * model-00002-of-00002) and one file outside it. What it accepts must be
 * the tensors of the shards its weight_map names, each once, from its own
 * shard inside the folder; what it refuses must be one TF_ERR_DATA line
 * naming the index.
 * Run: scripts/fuzz.sh 60 safetensors_index */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfcore/safetensors.h"

static void must(int ok)
{
    if (!ok) __builtin_trap();
}

static char top_dir[64], dir[64];

/* the folder goes when the fuzzer exits */
static void remove_folder(void)
{
    static const char *const files[] = {"m/model-00001-of-00002.safetensors", "m/model-00002-of-00002.safetensors",
                                        "m/model.safetensors.index.json", "outside.safetensors", "m", ""};
    char path[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", top_dir, files[i]);
        remove(path);
    }
}

static void write_shard(const char *path, const char *const *names, size_t n)
{
    static const int64_t shape[] = {2};
    static const float vals[2] = {1, 2};
    tf_st_tensor t[2];
    for (size_t i = 0; i < n; i++)
        t[i] = (tf_st_tensor){.name = names[i], .dtype = TF_DTYPE_F32, .ndim = 1, .shape = shape, .data = vals};
    tf_error err;
    must(tf_safetensors_write(path, t, n, NULL, 0, &err) == TF_OK);
}

/* the folder, once per process: <tmp>/m/ with the shards, <tmp>/outside.safetensors */
static void setup(void)
{
    char path[128];
    strcpy(top_dir, "/tmp/tfcore-fuzz-index-XXXXXX");
    must(mkdtemp(top_dir) != NULL);
    atexit(remove_folder);
    snprintf(dir, sizeof dir, "%s/m", top_dir);
    must(mkdir(dir, 0700) == 0);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_shard(path, (const char *[]){"a", "b"}, 2);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_shard(path, (const char *[]){"c"}, 1);
    snprintf(path, sizeof path, "%s/outside.safetensors", top_dir);
    write_shard(path, (const char *[]){"c"}, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) setup();
    char index[128];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(index, "wb");
    must(f != NULL);
    must(fwrite(data, 1, size, f) == size);
    must(fclose(f) == 0);
    tf_safetensors_set *set = NULL;
    tf_error err = {0};
    tf_status st = tf_safetensors_set_open(dir, "model.safetensors", &set, &err);
    if (st == TF_OK) {
        /* an index may name a subset of the shards (its weight_map is the
         * set): a and b come only with model-00001, c only with model-00002 */
        size_t n = tf_safetensors_set_count(set);
        must(n <= 3 && tf_safetensors_set_at(set, n, NULL) == NULL);
        int seen[3] = {0};
        for (size_t i = 0; i < n; i++) {
            const tf_safetensors *file;
            const tf_st_tensor *t = tf_safetensors_set_at(set, i, &file);
            must(t && t->name[0] >= 'a' && t->name[0] <= 'c' && t->name[1] == '\0');
            int k = t->name[0] - 'a';
            must(!seen[k]++);
            const char *path = tf_safetensors_path(file);
            must(strncmp(path, dir, strlen(dir)) == 0 && !strstr(path, ".."));
            must(strstr(path, k < 2 ? "/model-00001-of-00002" : "/model-00002-of-00002") != NULL);
        }
        must(seen[0] == seen[1]); /* one shard holds both */
        tf_safetensors_set_close(set);
    } else {
        must(st == TF_ERR_DATA && set == NULL);
        must(strncmp(err.msg, index, strlen(index)) == 0 && !strchr(err.msg, '\n'));
    }
    return 0;
}

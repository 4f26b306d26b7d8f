/* fuzz_imdb_csv.c — libFuzzer target for the IMDB readers' parsers
 * (plugins/data-imdb/imdb_read.c): any bytes as a review,sentiment CSV and
 * as text/label JSONL; what parses must be whole reviews with labels 0/1.
 * scripts/fuzz.sh builds targets against libtfcore's sources only, so the
 * reader, which lives in the data-imdb plugin, is compiled in here.
 * Run: scripts/fuzz.sh 60 imdb_csv */
#include <stdint.h>
#include <string.h>

#include "../../plugins/data-imdb/imdb_read.c"

/* a broken invariant is a crash the fuzzer reports */
static void must(int ok)
{
    if (!ok) __builtin_trap();
}

static void check_data(const tf_imdb_data *d)
{
    must(d->n > 0);
    for (size_t i = 0; i < d->n; i++) {
        must(strlen(d->texts[i]) == d->lengths[i]);
        must(d->labels[i] == 0 || d->labels[i] == 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_imdb_data d;
    tf_error err;
    if (tf_imdb_parse_csv((const char *)data, size, "fuzz.csv", &d, &err) == TF_OK) {
        check_data(&d);
        tf_imdb_data_free(&d);
    } else {
        must(d.n == 0 && d.texts == NULL && err.msg[0] != '\0');
    }
    if (tf_imdb_parse_jsonl((const char *)data, size, "fuzz.jsonl", &d, &err) == TF_OK) {
        check_data(&d);
        tf_imdb_data_free(&d);
    } else {
        must(d.n == 0 && d.texts == NULL && err.msg[0] != '\0');
    }
    return 0;
}

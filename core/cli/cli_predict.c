/* cli_predict.c — `tfcore predict -c FILE --input IN.jsonl --output OUT.jsonl`:
 * run the config's model (or --model DIR, a saved tfcore / Hugging Face
 * folder) in eval mode on JSONL inputs and write one JSONL line per input.
 *
 * Each input line is {"text": ..., "text_pair"?: ...}, tokenized with the
 * model's vocab.txt as BertTokenizerFast would ([CLS] a [SEP] b [SEP],
 * longest_first truncation to --max-length), or {"input_ids": [...],
 * "token_type_ids"?: [...], "attention_mask"?: [...]} used as given. Output:
 * classification {"logits": [...], "label": argmax}; question answering
 * {"start_logits": [...], "end_logits": [...], "start": i, "end": j, "score": s}
 * with the best span (start <= end, at most 30 tokens, inside text_pair when
 * there is one) and, for text inputs, "answer": the text it covers.
 * An attention_mask value other than 0/1, or a non-finite output, is an
 * error naming the input line (JSON has no NaN: never an empty logits list).
 * The inputs are self-contained (ids, or text for the model folder's
 * tokenizer), so the config needs no data section: a model section (and any
 * backend / precision / training keys) is enough. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plan.h"
#include "stack.h"
#include "tfcore/file.h"
#include "tfcore/file_read.h"
#include "tfcore/tokenizer.h"
#include "trainer_internal.h"

#define MAX_ANSWER_TOKENS 30

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfcore predict -c FILE --input IN.jsonl --output OUT.jsonl\n"
            "                      [--model DIR] [--batch-size N] [--max-length N] [-o section.key=value]...\n"
            "  Runs the config's model in eval mode (no dropout) on each input line (the config\n"
            "  needs no data section):\n"
            "    {\"text\": \"...\", \"text_pair\": \"...\"}  tokenized with the model's vocab.txt, or\n"
            "    {\"input_ids\": [...], \"token_type_ids\": [...], \"attention_mask\": [...]}\n"
            "  and writes one line per input: {\"logits\": [...], \"label\": k} for classification,\n"
            "  {\"start_logits\", \"end_logits\", \"start\", \"end\", \"score\"[, \"answer\"]} for QA.\n"
            "  --output FILE where the lines go (\"-\": stdout); never the --input file itself\n"
            "  --model DIR   use this saved model folder (sets model.pretrained, drops model.preset)\n"
            "  --batch-size  rows per forward (default: training.per_device_eval_batch_size)\n"
            "  --max-length  tokens per text input (default: the model's positions, at most 512)\n");
}

/* One tokenized input: ids/types/mask [n]; offsets [n][2] code points for text inputs. */
typedef struct pred_row {
    int n;
    int32_t *ids, *types, *mask;
    int32_t *offsets; /* NULL for id inputs */
    int8_t *seq_ids;  /* NULL for id inputs */
    char *context;    /* text_pair (or text) for answers, NULL for id inputs */
    int ctx_seq;      /* which sequence id the answer may come from */
    long line;        /* of the input file, for errors */
} pred_row;

static void row_free(pred_row *r)
{
    free(r->ids);
    free(r->types);
    free(r->mask);
    free(r->offsets);
    free(r->seq_ids);
    free(r->context);
}

static tf_status int_array(json_t *a, const char *where, const char *key, int32_t **out, int *n, tf_error *err)
{
    if (!json_is_array(a)) return tf_error_set(err, TF_ERR_DATA, "%s: \"%s\" must be an array of integers", where, key);
    size_t len = json_array_size(a);
    if (len == 0 || len > 65536)
        return tf_error_set(err, TF_ERR_DATA, "%s: \"%s\" has %zu elements (1..65536 allowed)", where, key, len);
    if (*n >= 0 && (size_t)*n != len)
        return tf_error_set(err, TF_ERR_DATA, "%s: \"%s\" has %zu elements, input_ids %d", where, key, len, *n);
    *out = malloc(len * sizeof **out);
    if (!*out) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < len; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return tf_error_set(err, TF_ERR_DATA, "%s: \"%s\"[%zu] is not a non-negative integer", where, key, i);
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    *n = (int)len;
    return TF_OK;
}

static tf_status parse_row(json_t *o, const char *where, const tf_tokenizer *tok, int max_len, int vocab_size,
                           pred_row *r, tf_encoding *enc, tf_error *err)
{
    memset(r, 0, sizeof *r);
    if (!json_is_object(o)) return tf_error_set(err, TF_ERR_DATA, "%s: each line must be a JSON object", where);
    json_t *text = json_object_get(o, "text"), *pair = json_object_get(o, "text_pair"),
           *ids = json_object_get(o, "input_ids");
    tf_status st;
    if (ids) {
        r->n = -1;
        if ((st = int_array(ids, where, "input_ids", &r->ids, &r->n, err))) return st;
        for (int i = 0; i < r->n; i++)
            if (r->ids[i] >= vocab_size)
                return tf_error_set(err, TF_ERR_DATA, "%s: input_ids[%d] = %d is outside the vocabulary (%d ids)",
                                    where, i, r->ids[i], vocab_size);
        json_t *t = json_object_get(o, "token_type_ids"), *m = json_object_get(o, "attention_mask");
        if (t) {
            if ((st = int_array(t, where, "token_type_ids", &r->types, &r->n, err))) return st;
        } else if (!(r->types = calloc((size_t)r->n, sizeof *r->types))) {
            return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
        }
        if (m) {
            if ((st = int_array(m, where, "attention_mask", &r->mask, &r->n, err))) return st;
            for (int i = 0; i < r->n; i++) /* HF's mask: 1 attend, 0 padding; anything else is a typo */
                if (r->mask[i] != 0 && r->mask[i] != 1)
                    return tf_error_set(err, TF_ERR_DATA, "%s: attention_mask[%d] = %d; a mask holds only 0 and 1",
                                        where, i, r->mask[i]);
        } else {
            if (!(r->mask = malloc((size_t)r->n * sizeof *r->mask))) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
            for (int i = 0; i < r->n; i++) r->mask[i] = 1;
        }
        return TF_OK;
    }
    if (!json_is_string(text))
        return tf_error_set(err, TF_ERR_DATA, "%s: needs \"text\" (a string) or \"input_ids\"", where);
    if (pair && !json_is_string(pair)) return tf_error_set(err, TF_ERR_DATA, "%s: \"text_pair\" must be a string", where);
    if (!tok)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: a text input needs a vocabulary, and the model has no vocab.txt (use --model DIR "
                            "with a saved model, or give input_ids)",
                            where);
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    eo.max_length = max_len;
    const char *a = json_string_value(text), *b = pair ? json_string_value(pair) : NULL;
    if ((st = tf_tokenizer_encode(tok, a, json_string_length(text), b, b ? json_string_length(pair) : 0, &eo, enc,
                                  err))) {
        tf_error_prefix(err, "%s", where);
        return st;
    }
    int n = enc->window_start[1]; /* the first window: truncation keeps one */
    r->n = n;
    r->ids = malloc((size_t)n * sizeof *r->ids);
    r->types = malloc((size_t)n * sizeof *r->types);
    r->mask = malloc((size_t)n * sizeof *r->mask);
    r->offsets = malloc(2 * (size_t)n * sizeof *r->offsets);
    r->seq_ids = malloc((size_t)n);
    r->context = strdup(b ? b : a);
    if (!r->ids || !r->types || !r->mask || !r->offsets || !r->seq_ids || !r->context)
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    memcpy(r->ids, enc->ids, (size_t)n * sizeof *r->ids);
    memcpy(r->types, enc->type_ids, (size_t)n * sizeof *r->types);
    memcpy(r->mask, enc->attention_mask, (size_t)n * sizeof *r->mask);
    memcpy(r->offsets, enc->offsets, 2 * (size_t)n * sizeof *r->offsets);
    memcpy(r->seq_ids, enc->sequence_ids, (size_t)n);
    r->ctx_seq = b ? 1 : 0;
    return TF_OK;
}

/* Bytes of the first `cp` code points of UTF-8 s (stops at the end). */
static size_t cp_to_byte(const char *s, int cp)
{
    size_t i = 0;
    for (int k = 0; k < cp && s[i]; k++) {
        i++;
        while (s[i] && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

static json_t *row_output(const tf_model_info *info, const pred_row *r, const float *l)
{
    json_t *o = json_object();
    if (info->task == TF_TASK_CLASSIFICATION) {
        json_t *a = json_array();
        int best = 0;
        for (int k = 0; k < info->num_labels; k++) {
            json_array_append_new(a, json_real(l[k]));
            if (l[k] > l[best]) best = k;
        }
        json_object_set_new(o, "logits", a);
        json_object_set_new(o, "label", json_integer(best));
        return o;
    }
    /* QA: l is [seq, 2] (start, end) per position; report this row's n positions */
    json_t *sa = json_array(), *ea = json_array();
    for (int i = 0; i < r->n; i++) {
        json_array_append_new(sa, json_real(l[2 * i]));
        json_array_append_new(ea, json_real(l[2 * i + 1]));
    }
    int bs = -1, be = -1;
    double bsc = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->seq_ids && r->seq_ids[i] != r->ctx_seq) continue;
        for (int j = i; j < r->n && j < i + MAX_ANSWER_TOKENS; j++) {
            if (r->seq_ids && r->seq_ids[j] != r->ctx_seq) break;
            double sc = (double)l[2 * i] + (double)l[2 * j + 1];
            if (bs < 0 || sc > bsc) bs = i, be = j, bsc = sc;
        }
    }
    json_object_set_new(o, "start_logits", sa);
    json_object_set_new(o, "end_logits", ea);
    json_object_set_new(o, "start", json_integer(bs));
    json_object_set_new(o, "end", json_integer(be));
    json_object_set_new(o, "score", json_real(bsc));
    if (bs >= 0 && r->offsets && r->context) {
        size_t b0 = cp_to_byte(r->context, r->offsets[2 * bs]), b1 = cp_to_byte(r->context, r->offsets[2 * be + 1]);
        json_object_set_new(o, "answer", json_stringn(r->context + b0, b1 > b0 ? b1 - b0 : 0));
    }
    return o;
}

typedef struct predictor {
    tf_stack stack;     /* backend, precision, model */
    const tf_model_info *info;
    tf_tokenizer *tok;
    void *dev;          /* ids, types, mask [B, S] int32 in backend memory */
    int32_t *host;      /* the same on the host */
    float *logits;      /* [B, cols] host */
    void *staging;
} predictor;

static tf_status open_predictor(predictor *p, const tf_plan *plan, tf_error *err)
{
    tf_stack_options so = {.device = 0, .threads = 0, .with_model = true, .defer_loss = false,
                           .label_smoothing_factor = 0.0f /* no labels: no loss */};
    tf_status st = tf_stack_open(&p->stack, plan, &so, err);
    if (st) return st;
    p->info = p->stack.model.info;
    if (p->info->vocab_file) {
        /* the model folder's tokenizer, as training and `tfcore tokenize` load it */
        if ((st = tf_tokenizer_load(p->info->vocab_file, NULL, &p->tok, err))) return st;
    }
    return TF_OK;
}

static void close_predictor(predictor *p)
{
    if (p->dev) p->stack.backend.vt->free(p->stack.backend.h, p->dev, TF_MEM_DEVICE);
    free(p->host);
    free(p->logits);
    free(p->staging);
    tf_tokenizer_free(p->tok);
    tf_stack_close(&p->stack);
}

/* A row's logits (the ones row_output prints) are all finite, or an error
 * naming the input line: JSON has no NaN, and a line of empty logits would
 * look like an answer. */
static tf_status check_finite_row(const predictor *p, const pred_row *r, const float *l, const char *in_path,
                                  tf_error *err)
{
    int n = p->info->task == TF_TASK_CLASSIFICATION ? p->info->num_labels : 2 * r->n;
    for (int k = 0; k < n; k++)
        if (!isfinite(l[k]))
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "%s:%ld: the model's output is not finite (%s %d is %s); check the model's weights "
                                "and this input",
                                in_path, r->line,
                                p->info->task == TF_TASK_CLASSIFICATION ? "logit" : k % 2 ? "end logit" : "start logit",
                                p->info->task == TF_TASK_CLASSIFICATION ? k : k / 2, isnan(l[k]) ? "NaN" : "infinite");
    return TF_OK;
}

/* Forward rows[0..n) padded to their longest; outputs appended to out. */
static tf_status run_batch(predictor *p, pred_row *rows, int n, int S, const char *in_path, FILE *out,
                           tf_error *err)
{
    int L = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].n > L) L = rows[i].n;
    size_t cells = (size_t)n * (size_t)L;
    int32_t *ids = p->host, *types = ids + cells, *mask = types + cells;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < L; j++) {
            bool in = j < rows[i].n;
            ids[(size_t)i * L + j] = in ? rows[i].ids[j] : 0;
            types[(size_t)i * L + j] = in ? rows[i].types[j] : 0;
            mask[(size_t)i * L + j] = in ? rows[i].mask[j] : 0;
        }
    tf_status st = p->stack.backend.vt->memcpy(p->stack.backend.h, p->dev, p->host, 3 * cells * sizeof(int32_t), TF_COPY_HOST_TO_DEVICE, NULL);
    if (st) return tf_error_set(err, st, "copying a batch to the backend failed");
    int32_t *d = p->dev;
    tf_batch b = {.rows = n, .seq = L, .capacity_rows = n, .capacity_seq = S, .input_ids = d,
                  .token_type_ids = d + cells, .attention_mask = d + 2 * cells};
    tf_model_output o;
    if ((st = p->stack.model.vt->forward(p->stack.model.h, &b, false, &o, err))) return st;
    size_t nl = (size_t)o.rows * (size_t)o.cols, es = tf_dtype_size(o.logits_dtype);
    void *dst = o.logits_dtype == TF_DTYPE_F32 ? (void *)p->logits : p->staging;
    if ((st = p->stack.backend.vt->memcpy(p->stack.backend.h, dst, o.logits, nl * es, TF_COPY_DEVICE_TO_HOST, NULL)) ||
        (st = p->stack.backend.vt->stream_sync(p->stack.backend.h, NULL, err)))
        return st;
    if (o.logits_dtype != TF_DTYPE_F32)
        for (size_t i = 0; i < nl; i++) {
            unsigned short h = ((unsigned short *)p->staging)[i];
            p->logits[i] = o.logits_dtype == TF_DTYPE_F16 ? tf_f16_to_f32(h) : tf_bf16_to_f32(h);
        }
    for (int i = 0; i < n; i++)
        if ((st = check_finite_row(p, &rows[i], p->logits + (size_t)i * (size_t)o.cols, in_path, err))) return st;
    for (int i = 0; i < n; i++) {
        json_t *j = row_output(p->info, &rows[i], p->logits + (size_t)i * (size_t)o.cols);
        char *line = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
        json_decref(j);
        if (!line) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
        fprintf(out, "%s\n", line);
        free(line);
    }
    return TF_OK;
}

/* run_batch, and on failure the input line it is about: a model or backend
 * error (an id outside an embedding table) names a row of the batch, not the
 * file, so each row is run alone until the one that fails is found. */
static tf_status run_batch_located(predictor *p, pred_row *rows, int n, int S, FILE *out, const char *in_path,
                                   tf_error *err)
{
    tf_status st = run_batch(p, rows, n, S, in_path, out, err);
    if (st == TF_OK || st == TF_ERR_RUNTIME) return st; /* out of memory, a device error: not the input's */
    for (int i = 0; n > 1 && i < n; i++) {
        tf_error one = {0};
        tf_status s1 = run_batch(p, &rows[i], 1, S, in_path, out, &one);
        if (s1 == TF_OK) continue;
        if (err) *err = one;
        tf_error_prefix(err, "%s:%ld", in_path, rows[i].line);
        return s1;
    }
    if (n == 1) tf_error_prefix(err, "%s:%ld", in_path, rows[0].line);
    else tf_error_prefix(err, "%s:%ld-%ld", in_path, rows[0].line, rows[n - 1].line);
    return st;
}

static tf_status predict_file(predictor *p, const char *in_path, const char *out_path, int B, int max_len,
                              tf_error *err)
{
    FILE *in;
    tf_status ost = tf_file_fopen_read(in_path, "input", TF_ERR_DATA, &in, err);
    if (ost != TF_OK) return ost;
    /* collected in memory, then written atomically: a failed run leaves no partial output */
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    if (!out) {
        fclose(in);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for %s", out_path);
    }
    int S = max_len;
    tf_status st = p->stack.model.vt->reserve(p->stack.model.h, B, S, err);
    size_t cells = (size_t)B * (size_t)S;
    if (!st) st = p->stack.backend.vt->alloc(p->stack.backend.h, 3 * cells * sizeof(int32_t), TF_MEM_DEVICE, &p->dev, err);
    int cols = p->info->task == TF_TASK_CLASSIFICATION ? p->info->num_labels : 2 * S;
    p->host = malloc(3 * cells * sizeof(int32_t));
    p->logits = malloc((size_t)B * (size_t)cols * sizeof(float));
    p->staging = malloc((size_t)B * (size_t)cols * 2);
    pred_row *rows = calloc((size_t)B, sizeof *rows);
    if (!st && (!p->host || !p->logits || !p->staging || !rows)) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    tf_encoding enc;
    tf_encoding_init(&enc);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0, count = 0;
    int nrows = 0;
    while (!st && (len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        bool blank = true;
        for (ssize_t i = 0; i < len; i++)
            if (line[i] != ' ' && line[i] != '\t' && line[i] != '\n' && line[i] != '\r') blank = false;
        if (blank) continue;
        char where[4200];
        snprintf(where, sizeof where, "%s:%ld", in_path, lineno);
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)len, 0, &je);
        if (!o) {
            st = tf_error_set(err, TF_ERR_DATA, "%s:%d: %s", where, je.column, je.text);
            break;
        }
        st = parse_row(o, where, p->tok, max_len, p->info->vocab_size, &rows[nrows], &enc, err);
        rows[nrows].line = lineno;
        json_decref(o);
        nrows++;
        if (!st && rows[nrows - 1].n > S)
            st = tf_error_set(err, TF_ERR_DATA, "%s: %d tokens, more than --max-length %d", where, rows[nrows - 1].n, S);
        if (!st && nrows == B) {
            st = run_batch_located(p, rows, nrows, S, out, in_path, err);
            count += nrows;
            for (int i = 0; i < nrows; i++) row_free(&rows[i]);
            nrows = 0;
        }
    }
    if (!st && nrows) {
        st = run_batch_located(p, rows, nrows, S, out, in_path, err);
        count += nrows;
    }
    for (int i = 0; rows && i < nrows; i++) row_free(&rows[i]);
    free(rows);
    free(line);
    tf_encoding_free(&enc);
    fclose(in);
    if (fclose(out) != 0 && !st) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory for %s", out_path);
    if (!st) st = tf_cli_write_output(out_path, text ? text : "", text ? text_len : 0, err);
    free(text);
    if (!st) fprintf(stderr, "tfcore: predicted %ld inputs into %s\n", count, out_path);
    return st;
}

int tf_cli_predict(int argc, char **argv)
{
    const char *config = NULL, *in = NULL, *out = NULL, *model_dir = NULL;
    long batch = 0, max_len = 0;
    char **ov = calloc((size_t)argc + 1, sizeof *ov);
    size_t nov = 0;
    if (!ov) return TF_ERR_RUNTIME;
    int rc = 0;
    char *model_override = NULL;
    for (int i = 1; i < argc; i++) {
        char *end;
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if ((!strcmp(a, "-c") || !strcmp(a, "--config")) && has) config = argv[++i];
        else if (!strcmp(a, "--input") && has) in = argv[++i];
        else if (!strcmp(a, "--output") && has) out = argv[++i];
        else if (!strcmp(a, "--model") && has) model_dir = argv[++i];
        else if (!strcmp(a, "-o") && has) ov[nov++] = argv[++i];
        else if ((!strcmp(a, "--batch-size") || !strcmp(a, "--max-length")) && has) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 65536) {
                rc = tf_cli_usage_error("predict", "%s needs a positive integer, got '%s'", a, argv[i]);
                goto done;
            }
            if (!strcmp(a, "--batch-size")) batch = v;
            else max_len = v;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            goto done;
        } else {
            rc = tf_cli_usage_error("predict", "unknown or incomplete argument '%s'", a);
            goto done;
        }
    }
    if (!config || !in || !out) {
        rc = tf_cli_usage_error("predict", "-c FILE, --input IN.jsonl and --output OUT.jsonl are required");
        goto done;
    }
    tf_error err = {0};
    if (tf_cli_check_not_input("--output", out, &in, 1, &err)) {
        rc = tf_cli_fail(&err);
        goto done;
    }
    const char *unset[1] = {"model.preset"};
    if (model_dir) {
        size_t n = strlen(model_dir) + 32;
        if (!(model_override = malloc(n))) { rc = TF_ERR_RUNTIME; goto done; }
        snprintf(model_override, n, "model.pretrained=\"%s\"", model_dir);
        ov[nov++] = model_override;
    }
    tf_plan plan;
    /* the inputs are the JSONL file (ids, or text for the model's tokenizer): no data section needed */
    if (tf_plan_resolve_for(&plan, config, ov, nov, unset, model_dir ? 1 : 0, true, &err)) {
        rc = tf_cli_fail(&err);
        goto done;
    }
    predictor p;
    memset(&p, 0, sizeof p);
    tf_status st = open_predictor(&p, &plan, &err);
    if (!st) {
        int S = max_len ? (int)max_len : p.info->max_position_embeddings < 512 ? p.info->max_position_embeddings : 512;
        int B = batch ? (int)batch : (int)plan.training.per_device_eval_batch_size;
        if (S > p.info->max_position_embeddings)
            st = tf_error_set(&err, TF_ERR_USAGE, "--max-length %d is more than the model's %d positions", S,
                              p.info->max_position_embeddings);
        else
            st = predict_file(&p, in, out, B, S, &err);
    }
    if (st) rc = tf_cli_fail(&err);
    close_predictor(&p);
    tf_plan_free(&plan);
done:
    free(model_override);
    free(ov);
    return rc;
}

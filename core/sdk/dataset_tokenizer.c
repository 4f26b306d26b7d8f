/* dataset_tokenizer.c — the tokenizer a dataset plugin uses (tfcore/dataset.h):
 * the model's tokenizer unless the data section names another, loaded by
 * tf_tokenizer_load exactly as `tfcore tokenize --vocab` loads it (a folder:
 * tokenizer.json, else vocab.txt, with its tokenizer_config.json), checked to
 * fit the model's embedding table. */
#include "tfcore/dataset.h"

tf_status tf_dataset_tokenizer(const tf_dataset_open_args *a, const char *vocab_file, int do_lower_case,
                               tf_tokenizer **out, tf_error *err)
{
    *out = NULL;
    const char *vocab = vocab_file ? vocab_file : a->vocab_file;
    if (!vocab)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: the model has no vocab.txt (a preset): set data.vocab_file to a WordPiece vocab",
                            tf_cfg_where(a->section, "plugin"));
    tf_tokenizer_options to;
    tf_tokenizer_options_init(&to);
    to.do_lower_case = do_lower_case; /* -1: the vocabulary's own setting */
    tf_tokenizer *tok;
    tf_status st = tf_tokenizer_load(vocab, &to, &tok, err);
    if (st) return st;
    if (a->vocab_size > 0 && tf_tokenizer_vocab_size(tok) > a->vocab_size) {
        st = tf_error_set(err, TF_ERR_CONFIG, "%s has %d tokens but the model's vocab_size is %d", vocab,
                          tf_tokenizer_vocab_size(tok), a->vocab_size);
        tf_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return TF_OK;
}

# core/tokenizer.mk — the BERT WordPiece tokenizer of libtfcore (identical to
# Hugging Face's BertTokenizerFast), the `tfcore tokenize` verb, its unit
# test, the reference test against transformers/tokenizers, the benchmark
# driver, and the test data. (The fuzz target and its seeds live in
# tests/fuzz/, distributed as a whole by tests/local.mk.)

core_libtfcore_la_SOURCES += \
	core/sdk/tokenizer_internal.h \
	core/sdk/tokenizer_unicode.c core/sdk/tokenizer_unicode_tables.h \
	core/sdk/tokenizer_grow.c \
	core/sdk/tokenizer_vocab.c \
	core/sdk/tokenizer_config.c \
	core/sdk/tokenizer_normalize.c \
	core/sdk/tokenizer_wordpiece.c \
	core/sdk/tokenizer_encode.c \
	core/sdk/tokenizer_decode.c
pkginclude_HEADERS += core/include/tfcore/tokenizer.h
core_tfcore_SOURCES += core/cli/cli_tokenize.c

check_PROGRAMS += tests/test_tokenizer
tests_test_tokenizer_SOURCES = tests/test_tokenizer.c core/cli/cli_tokenize.c
tests_test_tokenizer_CPPFLAGS = $(TEST_CPPFLAGS) -DTF_SRCDIR='"$(abs_top_srcdir)"'
tests_test_tokenizer_LDADD = $(TEST_LDADD)
TESTS += tests/test_tokenizer tests/ref/tokenizer_vs_hf.py

# bench/tokenizer_vs_hf.py times this driver against the tokenizers package
check_PROGRAMS += bench/tokenizer_bench
bench_tokenizer_bench_SOURCES = bench/tokenizer_bench.c
bench_tokenizer_bench_CPPFLAGS = $(AM_CPPFLAGS)
bench_tokenizer_bench_LDADD = core/libtfcore.la

EXTRA_DIST += tests/ref/tokenizer_vs_hf.py tests/ref/tokenizer_corpus.py tests/ref/hf_vocab.py \
	tests/ref/tokenizer_unicode_tables.py tests/data/tokenizer bench/tokenizer_vs_hf.py

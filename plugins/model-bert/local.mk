# plugins/model-bert/local.mk — the BERT model plugin (tfcore-model-bert.so),
# its unit tests, the driver the reference test runs, and the reference test
# against transformers.

plugin_LTLIBRARIES += plugins/model-bert/tfcore-model-bert.la
plugins_model_bert_tfcore_model_bert_la_SOURCES = \
	plugins/model-bert/bert.h \
	plugins/model-bert/bert_config.c \
	plugins/model-bert/bert_params.c \
	plugins/model-bert/bert_rng.c \
	plugins/model-bert/bert_load.c \
	plugins/model-bert/bert_save.c \
	plugins/model-bert/bert_ops.c \
	plugins/model-bert/bert_forward.c \
	plugins/model-bert/bert_backward.c \
	plugins/model-bert/bert_unpad.c \
	plugins/model-bert/bert_plugin.c
plugins_model_bert_tfcore_model_bert_la_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
plugins_model_bert_tfcore_model_bert_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_model_bert_tfcore_model_bert_la_LIBADD = $(PLUGIN_LIBADD) $(JANSSON_LIBS) -lm

# Unit tests: config keys and every error path (checkpoints are written by the
# test itself into a temporary folder).
if HAVE_CHECK
check_PROGRAMS += tests/test_model_bert
tests_test_model_bert_SOURCES = tests/test_model_bert.c
tests_test_model_bert_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_model_bert_LDADD = $(TEST_LDADD)
TESTS += tests/test_model_bert
endif

# The driver: dlopens backend-cpu and model-bert from the build tree, runs
# forward/backward/AdamW on a batch, writes logits, losses and gradients.
check_PROGRAMS += tests/model_bert_driver
tests_model_bert_driver_SOURCES = tests/model_bert_driver.c
tests_model_bert_driver_CPPFLAGS = $(TEST_CPPFLAGS)
tests_model_bert_driver_LDADD = $(TEST_LDADD)

TESTS += tests/ref/model_bert_vs_hf.py
EXTRA_DIST += tests/ref/model_bert_vs_hf.py
EXTRA_DIST += plugins/model-bert/README.md

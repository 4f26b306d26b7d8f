# plugins/data-squad — SQuAD v1.1/v2.0 question answering as transformers'
# run_qa.py + utils_qa.py: windows and labels (squad_features.c), n-best
# postprocessing and predictions.json / null_odds.json (squad_postprocess.c),
# the plugin itself (squad_plugin.c).
SQUAD_PLUGIN_SOURCES = \
	plugins/data-squad/squad_plugin.c plugins/data-squad/squad_plugin.h \
	plugins/data-squad/squad_features.c plugins/data-squad/squad_features.h \
	plugins/data-squad/squad_postprocess.c plugins/data-squad/squad_postprocess.h

plugin_LTLIBRARIES += plugins/data-squad/tfcore-dataset-squad.la
plugins_data_squad_tfcore_dataset_squad_la_SOURCES = $(SQUAD_PLUGIN_SOURCES)
plugins_data_squad_tfcore_dataset_squad_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_data_squad_tfcore_dataset_squad_la_LIBADD = $(PLUGIN_LIBADD) -lm

# Tests compile the plugin's sources (no dlopen). The tool dumps features and
# predictions as JSON for the reference test against run_qa's preprocessing
# and utils_qa's postprocessing (tests/ref/squad_features_vs_hf.py).
check_PROGRAMS += tests/squad_features_tool
tests_squad_features_tool_SOURCES = tests/squad_features_tool.c $(SQUAD_PLUGIN_SOURCES)
tests_squad_features_tool_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/data-squad
tests_squad_features_tool_LDADD = $(TEST_LDADD) -lm

if HAVE_CHECK
check_PROGRAMS += tests/test_data_squad
tests_test_data_squad_SOURCES = tests/test_data_squad.c $(SQUAD_PLUGIN_SOURCES)
tests_test_data_squad_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/data-squad \
	-DTF_SRCDIR='"$(abs_top_srcdir)"'
tests_test_data_squad_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_data_squad
endif
TESTS += tests/ref/squad_features_vs_hf.py
EXTRA_DIST += tests/ref/squad_features_vs_hf.py tests/data/data-squad
EXTRA_DIST += plugins/data-squad/README.md

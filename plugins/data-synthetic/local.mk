# plugins/data-synthetic — generated data, no files needed.
plugin_LTLIBRARIES += plugins/data-synthetic/tfcore-dataset-synthetic.la
plugins_data_synthetic_tfcore_dataset_synthetic_la_SOURCES = plugins/data-synthetic/synthetic.c
plugins_data_synthetic_tfcore_dataset_synthetic_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_data_synthetic_tfcore_dataset_synthetic_la_LIBADD = $(PLUGIN_LIBADD)
EXTRA_DIST += plugins/data-synthetic/README.md
# the plugin compiled into its test (tests/test_data_synthetic.c includes synthetic.c)
if HAVE_CHECK
check_PROGRAMS += tests/test_data_synthetic
tests_test_data_synthetic_SOURCES = tests/test_data_synthetic.c
tests_test_data_synthetic_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/data-synthetic
tests_test_data_synthetic_LDADD = $(TEST_LDADD)
TESTS += tests/test_data_synthetic
endif

# plugins/data-synthetic — generated data, no files needed.
plugin_LTLIBRARIES += plugins/data-synthetic/tfcore-dataset-synthetic.la
plugins_data_synthetic_tfcore_dataset_synthetic_la_SOURCES = plugins/data-synthetic/synthetic.c
plugins_data_synthetic_tfcore_dataset_synthetic_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_data_synthetic_tfcore_dataset_synthetic_la_LIBADD = $(PLUGIN_LIBADD)
EXTRA_DIST += plugins/data-synthetic/README.md

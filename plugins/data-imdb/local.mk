# plugins/data-imdb — IMDB sentiment (readers in imdb_read.c, plugin in imdb.c).
plugin_LTLIBRARIES += plugins/data-imdb/tfcore-dataset-imdb.la
plugins_data_imdb_tfcore_dataset_imdb_la_SOURCES = plugins/data-imdb/imdb.c \
	plugins/data-imdb/imdb_read.c plugins/data-imdb/imdb_read.h
plugins_data_imdb_tfcore_dataset_imdb_la_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
plugins_data_imdb_tfcore_dataset_imdb_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_data_imdb_tfcore_dataset_imdb_la_LIBADD = $(PLUGIN_LIBADD) $(JANSSON_LIBS)
EXTRA_DIST += plugins/data-imdb/README.md

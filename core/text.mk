# core/text.mk — text datasets: SQuAD loading and the official SQuAD
# evaluation in libtfcore, the `tfcore squad-eval` verb, and the IMDB readers
# (plugins/data-imdb/imdb_read.c, compiled here into their test; the data-imdb
# plugin links the same file).

core_libtfcore_la_SOURCES += \
	core/sdk/squad_internal.h \
	core/sdk/squad_storage.c \
	core/sdk/squad_normalize.c \
	core/sdk/squad_format.c \
	core/sdk/squad_json.c \
	core/sdk/squad_eval.c
pkginclude_HEADERS += core/include/tfcore/squad.h
core_tfcore_SOURCES += core/cli/cli_squad_eval.c

check_PROGRAMS += tests/test_squad tests/test_imdb_read
tests_test_squad_SOURCES = tests/test_squad.c
tests_test_squad_CPPFLAGS = $(TEST_CPPFLAGS) -DTF_SRCDIR='"$(abs_top_srcdir)"' \
	-DTF_BUILDDIR='"$(abs_top_builddir)"'
tests_test_squad_LDADD = $(TEST_LDADD)
tests_test_imdb_read_SOURCES = tests/test_imdb_read.c \
	plugins/data-imdb/imdb_read.c plugins/data-imdb/imdb_read.h
tests_test_imdb_read_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/data-imdb \
	-DTF_SRCDIR='"$(abs_top_srcdir)"'
tests_test_imdb_read_LDADD = $(TEST_LDADD)
TESTS += tests/test_squad tests/test_imdb_read tests/ref/squad_eval_vs_hf.py

# test data (whole folders) and the reference test; the fuzz targets and their
# corpora (tests/fuzz/) are distributed by tests/local.mk
EXTRA_DIST += tests/ref/squad_eval_vs_hf.py tests/data/squad tests/data/imdb

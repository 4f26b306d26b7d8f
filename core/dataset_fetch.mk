# core/dataset_fetch.mk — datasets by name (data.path = "imdb", "squad",
# "squad_v2"): fetched with the hub client's downloader (core/hub.mk) into
# tfcore's cache, archives unpacked safely with libarchive (when configure
# found it). Tests: tests/test_archive_extract.c (the unpacking rules),
# tests/test_datasets.sh against tests/dataset_server.py
# (loopback only), wired in tests/local.mk; fuzz target
# tests/fuzz/fuzz_archive_extract.c.

core_libtfcore_la_SOURCES += core/sdk/dataset_fetch.c core/sdk/archive_extract.c \
	core/sdk/archive_extract.h
pkginclude_HEADERS += core/include/tfcore/dataset_fetch.h
if HAVE_LIBARCHIVE
core_libtfcore_la_CPPFLAGS += -DTF_HAVE_LIBARCHIVE=1 $(LIBARCHIVE_CFLAGS)
core_libtfcore_la_LIBADD += $(LIBARCHIVE_LIBS)
endif

if HAVE_CHECK
if HAVE_LIBARCHIVE
check_PROGRAMS += tests/test_archive_extract
# archive_extract.c is private to libtfcore.so: the test compiles its own copy
tests_test_archive_extract_SOURCES = tests/test_archive_extract.c core/sdk/archive_extract.c
tests_test_archive_extract_CPPFLAGS = $(TEST_CPPFLAGS) -DTF_HAVE_LIBARCHIVE=1 $(LIBARCHIVE_CFLAGS)
tests_test_archive_extract_LDADD = $(TEST_LDADD) $(LIBARCHIVE_LIBS)
TESTS += tests/test_archive_extract
endif
endif

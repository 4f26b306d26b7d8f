# core/hub.mk — models by Hugging Face name: the hub-compatible cache,
# downloads with libcurl (when configure found it), `tfcore download`.
# Tests: tests/test_hub.sh against tests/hub_server.py (loopback only),
# wired in tests/local.mk; fuzz target tests/fuzz/fuzz_hub_parse.c.

core_libtfcore_la_SOURCES += core/sdk/hub_internal.h core/sdk/hub_parse.c core/sdk/hub_resolve.c \
	core/sdk/hub_cache.c core/sdk/hub_download.c
pkginclude_HEADERS += core/include/tfcore/hub.h
core_tfcore_SOURCES += core/cli/cli_download.c
if HAVE_CURL
core_libtfcore_la_CPPFLAGS += -DTF_HAVE_LIBCURL=1 $(LIBCURL_CFLAGS) $(LIBCRYPTO_CFLAGS)
core_libtfcore_la_LIBADD += $(LIBCURL_LIBS) $(LIBCRYPTO_LIBS)
endif

if HAVE_CHECK
check_PROGRAMS += tests/test_hub_parse
# the hub module's helpers are private to libtfcore.so: the test compiles its own copy
tests_test_hub_parse_SOURCES = tests/test_hub_parse.c core/sdk/hub_parse.c \
	core/sdk/hub_cache.c core/sdk/hub_download.c
tests_test_hub_parse_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_hub_parse_LDADD = $(TEST_LDADD)
if HAVE_CURL
tests_test_hub_parse_CPPFLAGS += -DTF_HAVE_LIBCURL=1 $(LIBCURL_CFLAGS) $(LIBCRYPTO_CFLAGS)
tests_test_hub_parse_LDADD += $(LIBCURL_LIBS) $(LIBCRYPTO_LIBS)
endif
TESTS += tests/test_hub_parse
endif

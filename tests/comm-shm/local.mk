# tests/comm-shm/local.mk — the "shm" comm plugin, a test double of the core's
# process launcher path (forked CPU workers, shared-memory collectives). Built
# for `make check` only, never installed; tests load it from
# $(top_builddir)/tests/comm-shm/.libs (TFCORE_PLUGIN_PATH). See README.md.
check_LTLIBRARIES += tests/comm-shm/tfcore-comm-shm.la
tests_comm_shm_tfcore_comm_shm_la_SOURCES = tests/comm-shm/comm_shm.c
# -rpath: a check_ library is a convenience library unless told where it
# would go; this makes libtool build the shared module the loader needs.
tests_comm_shm_tfcore_comm_shm_la_LDFLAGS = $(PLUGIN_LDFLAGS) -rpath $(abs_builddir)
tests_comm_shm_tfcore_comm_shm_la_LIBADD = $(PLUGIN_LIBADD)
EXTRA_DIST += tests/comm-shm/README.md

# Its own test forks 2 and 3 workers and runs them with backend-cpu.
if HAVE_OPENBLAS
if HAVE_CHECK
check_PROGRAMS += tests/test_comm_shm
tests_test_comm_shm_SOURCES = tests/test_comm_shm.c
tests_test_comm_shm_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_comm_shm_LDADD = $(TEST_LDADD)
TESTS += tests/test_comm_shm
endif
endif

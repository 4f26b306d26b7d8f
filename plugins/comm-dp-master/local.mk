# plugins/comm-dp-master/local.mk — comm-dp-master: nn.DataParallel semantics
# (replica threads, gradients summed on the root, root-only optimizer,
# parameter broadcast), its Check test and an allreduce timing program.
# Needs only pthreads and libtfcore. See plugins/comm-dp-master/README.md.
plugin_LTLIBRARIES += plugins/comm-dp-master/tfcore-comm-dp-master.la
plugins_comm_dp_master_tfcore_comm_dp_master_la_SOURCES = \
	plugins/comm-dp-master/dp_master.h \
	plugins/comm-dp-master/plugin.c \
	plugins/comm-dp-master/config.c \
	plugins/comm-dp-master/barrier.c \
	plugins/comm-dp-master/collective.c \
	plugins/comm-dp-master/sum.c
plugins_comm_dp_master_tfcore_comm_dp_master_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_comm_dp_master_tfcore_comm_dp_master_la_LIBADD = $(PLUGIN_LIBADD)

# The test loads backend-cpu and dp-master through the real loader from the
# build tree ($top_builddir/plugins/*/.libs); it skips when backend-cpu was
# not built (no OpenBLAS).
if HAVE_CHECK
check_PROGRAMS += tests/test_comm_dp_master
tests_test_comm_dp_master_SOURCES = tests/test_comm_dp_master.c
tests_test_comm_dp_master_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_comm_dp_master_LDADD = $(TEST_LDADD)
TESTS += tests/test_comm_dp_master
endif

# allreduce timings of both host-memory algorithms (built by `make check`,
# run by hand: see its header and README.md).
check_PROGRAMS += plugins/comm-dp-master/bench_allreduce
plugins_comm_dp_master_bench_allreduce_SOURCES = plugins/comm-dp-master/bench_allreduce.c
plugins_comm_dp_master_bench_allreduce_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/runtime
plugins_comm_dp_master_bench_allreduce_LDADD = $(TFCORE_RUNTIME_LIBS)

EXTRA_DIST += plugins/comm-dp-master/README.md

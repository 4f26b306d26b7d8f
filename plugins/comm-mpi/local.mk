# plugins/comm-mpi — DDP-style gradient all-reduce over Open MPI, started by
# mpirun (see plugins/comm-mpi/README.md), and its tests:
#   tests/test_comm_mpi_config  check_config, probe and init's argument checks
#                               through the real loader (no mpirun needed);
#   tests/test_comm_mpi.sh      runs tests/test_comm_mpi_driver under mpirun
#                               with 2 and 4 ranks (skipped without mpirun).
# Built only when configure found Open MPI (HAVE_MPI).

EXTRA_DIST += plugins/comm-mpi/README.md tests/test_comm_mpi.sh \
	tests/data/comm-mpi/lsan.supp

if HAVE_MPI
plugin_LTLIBRARIES += plugins/comm-mpi/tfcore-comm-mpi.la
plugins_comm_mpi_tfcore_comm_mpi_la_SOURCES = \
	plugins/comm-mpi/comm_mpi.h \
	plugins/comm-mpi/mpi_plugin.c \
	plugins/comm-mpi/mpi_config.c \
	plugins/comm-mpi/mpi_library.c \
	plugins/comm-mpi/mpi_buffers.c \
	plugins/comm-mpi/mpi_sharded.c \
	plugins/comm-mpi/mpi_allreduce.c \
	plugins/comm-mpi/mpi_poll.c \
	plugins/comm-mpi/mpi_p2p.c \
	plugins/comm-mpi/mpi_blocking.c
plugins_comm_mpi_tfcore_comm_mpi_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
# `omp simd` on the AVG division works with or without OpenMP.
plugins_comm_mpi_tfcore_comm_mpi_la_CFLAGS = $(AM_CFLAGS) -fopenmp-simd
plugins_comm_mpi_tfcore_comm_mpi_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_comm_mpi_tfcore_comm_mpi_la_LIBADD = $(PLUGIN_LIBADD) $(MPI_LIBS)

# The driver does not link MPI: it loads the plugin (and backend-cpu) through
# tf_registry, as tfcore does, so the RTLD_LOCAL problem shows if it is back.
check_PROGRAMS += tests/test_comm_mpi_driver
tests_test_comm_mpi_driver_SOURCES = tests/test_comm_mpi_driver.c
tests_test_comm_mpi_driver_CPPFLAGS = $(TEST_CPPFLAGS) $(MPI_CFLAGS)
tests_test_comm_mpi_driver_LDADD = $(TFCORE_RUNTIME_LIBS)
TESTS += tests/test_comm_mpi.sh

if HAVE_CHECK
check_PROGRAMS += tests/test_comm_mpi_config
tests_test_comm_mpi_config_SOURCES = tests/test_comm_mpi_config.c
tests_test_comm_mpi_config_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_comm_mpi_config_LDADD = $(TEST_LDADD)
TESTS += tests/test_comm_mpi_config
endif
endif

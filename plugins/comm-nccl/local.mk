# plugins/comm-nccl/local.mk — comm-nccl: DDP gradient all-reduce over NCCL,
# one process per GPU (built when configure found CUDA and NCCL; with Open
# MPI too when configure found it, for bootstrap = "mpi"), and the driver
# tests/test_comm_nccl.sh runs it through. See plugins/comm-nccl/README.md.

COMM_NCCL_SOURCES = \
	plugins/comm-nccl/nccl_internal.h \
	plugins/comm-nccl/nccl_comm.h \
	plugins/comm-nccl/nccl_config.c \
	plugins/comm-nccl/nccl_bootstrap.c \
	plugins/comm-nccl/nccl_bootstrap_mpi.c \
	plugins/comm-nccl/nccl_probe.c \
	plugins/comm-nccl/comm_nccl.c \
	plugins/comm-nccl/nccl_p2p.c
# Only the CUDA runtime: NCCL and the stream/event calls need nothing else.
COMM_NCCL_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) $(NCCL_CFLAGS)
COMM_NCCL_LDFLAGS = -L$(CUDA_DIR)/lib64 -Wl,-rpath,$(CUDA_DIR)/lib64
COMM_NCCL_LIBS = $(NCCL_LIBS) -lcudart
# With Open MPI, its header only: libmpi is dlopen()ed when bootstrap "mpi"
# is chosen, so the plugin loads where Open MPI is not installed
# (tests/test_comm_nccl.sh checks that no libmpi is NEEDED).
if HAVE_MPI
COMM_NCCL_CPPFLAGS += -DTF_NCCL_WITH_MPI $(MPI_CFLAGS)
COMM_NCCL_LIBS += -ldl
endif

if HAVE_NCCL
plugin_LTLIBRARIES += plugins/comm-nccl/tfcore-comm-nccl.la
plugins_comm_nccl_tfcore_comm_nccl_la_SOURCES = $(COMM_NCCL_SOURCES)
plugins_comm_nccl_tfcore_comm_nccl_la_CPPFLAGS = $(COMM_NCCL_CPPFLAGS)
plugins_comm_nccl_tfcore_comm_nccl_la_LDFLAGS = $(PLUGIN_LDFLAGS) $(COMM_NCCL_LDFLAGS)
plugins_comm_nccl_tfcore_comm_nccl_la_LIBADD = $(PLUGIN_LIBADD) $(COMM_NCCL_LIBS)

# Loads the plugin as the core does and starts ranks as the core's
# launchers do (plain C: it needs neither CUDA nor NCCL headers).
check_PROGRAMS += plugins/comm-nccl/comm-nccl-driver
plugins_comm_nccl_comm_nccl_driver_SOURCES = plugins/comm-nccl/comm_nccl_driver.c
plugins_comm_nccl_comm_nccl_driver_CPPFLAGS = $(TEST_CPPFLAGS)
plugins_comm_nccl_comm_nccl_driver_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_comm_nccl.sh
endif

EXTRA_DIST += plugins/comm-nccl/README.md tests/test_comm_nccl.sh tests/data/comm-nccl

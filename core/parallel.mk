# core/parallel.mk — a job of several workers: who each worker is
# (worker.h), how they are started and stopped together (launch.c), the
# trainer's collectives (trainer_comm.c) and DDP's overlapped gradient
# buckets (grad_buckets.c), the collectives' flight recorder (comm_recorder.c),
# all in the private runtime (core/local.mk). The comm plugins themselves live
# in plugins/comm-*.
core_libtfcore_runtime_la_SOURCES += \
	core/runtime/worker.h \
	core/runtime/launch.c core/runtime/launch.h \
	core/runtime/stop_signal.c core/runtime/stop_signal.h \
	core/runtime/trainer_preflight.c core/runtime/trainer_preflight.h \
	core/runtime/trainer_comm.c \
	core/runtime/grad_buckets.c core/runtime/grad_buckets.h \
	core/runtime/comm_recorder.c core/runtime/comm_recorder.h \
	core/runtime/comm_peers.c core/runtime/comm_peers.h \
	core/runtime/trainer_strategy.c core/runtime/trainer_strategy.h \
	core/runtime/trainer_zero.c

# The strategies end to end: equivalence with one worker, overlap order,
# uneven shards, killed workers (tests/test_parallel.sh), and the tool that
# compares two models' parameters.
check_PROGRAMS += tests/params_diff
tests_params_diff_SOURCES = tests/params_diff.c
tests_params_diff_CPPFLAGS = $(TEST_CPPFLAGS)
tests_params_diff_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_parallel.sh
EXTRA_DIST += tests/test_parallel.sh
# ZeRO stage 1 and 2 (comm.zero_stage): equal to DDP, memory per rank,
# checkpoints and resume across world sizes, refusals (tests/test_zero.sh).
TESTS += tests/test_zero.sh
EXTRA_DIST += tests/test_zero.sh
# comm-mpi cut to the ABI 1.4 vtable (no reduce_start): ZeRO-2's fallback
if HAVE_MPI
check_LTLIBRARIES += tests/abi14/tfcore-comm-mpi14.la
tests_abi14_tfcore_comm_mpi14_la_SOURCES = tests/abi14/comm_mpi_abi14.c
tests_abi14_tfcore_comm_mpi14_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DCOMM_MPI_SO='"$(abs_top_builddir)/plugins/comm-mpi/.libs/tfcore-comm-mpi.so"'
tests_abi14_tfcore_comm_mpi14_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
endif
# The collectives' flight recorder and its report (comm_recorder.c).
check_PROGRAMS += tests/test_comm_recorder
tests_test_comm_recorder_SOURCES = tests/test_comm_recorder.c
tests_test_comm_recorder_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_comm_recorder_LDADD = $(TEST_LDADD)
TESTS += tests/test_comm_recorder
# The ranks' heartbeat across machines and its report (comm_peers.c).
check_PROGRAMS += tests/test_comm_peers
tests_test_comm_peers_SOURCES = tests/test_comm_peers.c
tests_test_comm_peers_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_comm_peers_LDADD = $(TEST_LDADD)
TESTS += tests/test_comm_peers

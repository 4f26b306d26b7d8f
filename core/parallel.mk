# core/parallel.mk — a job of several workers: who each worker is
# (worker.h), how they are started and stopped together (launch.c), the
# trainer's collectives (trainer_comm.c) and DDP's overlapped gradient
# buckets (grad_buckets.c), the collectives' flight recorder (comm_recorder.c),
# all in the private runtime (core/local.mk). The comm plugins themselves live
# in plugins/comm-*.
core_libtfcore_runtime_la_SOURCES += \
	core/src/worker.h \
	core/src/launch.c core/src/launch.h \
	core/src/stop_signal.c core/src/stop_signal.h \
	core/src/preflight.c core/src/preflight.h \
	core/src/trainer_comm.c \
	core/src/strategy.c core/src/strategy.h \
	core/src/strategy_zero.c \
	core/src/grad_buckets.c core/src/grad_buckets.h \
	core/src/comm_recorder.c core/src/comm_recorder.h

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
# The collectives' flight recorder and its report (comm_recorder.c).
check_PROGRAMS += tests/test_comm_recorder
tests_test_comm_recorder_SOURCES = tests/test_comm_recorder.c
tests_test_comm_recorder_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_comm_recorder_LDADD = $(TEST_LDADD)
TESTS += tests/test_comm_recorder

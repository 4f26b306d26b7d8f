# core/pipeline.mk — pipeline parallelism (#19, core/src/pipeline.h): the
# pipeline section, the GPipe / 1F1B schedules and their simulation, the
# balanced split of the layers (pure, tests/test_pipeline.c), and a stage's
# step in the trainer (pipeline_step.c, end to end in tests/test_pipeline_mpi.sh).
core_libtfcore_runtime_la_SOURCES += \
	core/src/pipeline.h \
	core/src/pipeline_config.c \
	core/src/pipeline_schedule.c \
	core/src/pipeline_partition.c \
	core/src/pipeline_plan.c \
	core/src/pipeline_step.c core/src/pipeline_step.h

if HAVE_CHECK
check_PROGRAMS += tests/test_pipeline
tests_test_pipeline_SOURCES = tests/test_pipeline.c
tests_test_pipeline_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_pipeline_LDADD = $(TEST_LDADD)
TESTS += tests/test_pipeline
endif

# End to end under mpirun (skipped without the mpi comm plugin).
TESTS += tests/test_pipeline_mpi.sh
EXTRA_DIST += tests/test_pipeline_mpi.sh

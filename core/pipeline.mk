# core/pipeline.mk — pipeline parallelism (#19, core/runtime/pipeline.h): the
# pipeline section, the GPipe / 1F1B schedules and their simulation, the
# balanced split of the layers (pure, tests/test_pipeline.c), and a stage's
# step in the trainer (trainer_pipeline.c, end to end in tests/test_pipeline_mpi.sh).
core_libtfcore_runtime_la_SOURCES += \
	core/runtime/pipeline.h \
	core/runtime/pipeline_config.c \
	core/runtime/pipeline_schedule.c \
	core/runtime/pipeline_partition.c \
	core/runtime/pipeline_plan.c \
	core/runtime/trainer_pipeline.c core/runtime/trainer_pipeline.h

if HAVE_CHECK
check_PROGRAMS += tests/test_pipeline
tests_test_pipeline_SOURCES = tests/test_pipeline.c
tests_test_pipeline_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_pipeline_LDADD = $(TEST_LDADD)
TESTS += tests/test_pipeline
# the pipeline's messages under NCCL's point-to-point rules, as comm-nccl groups them
check_PROGRAMS += tests/test_pipeline_nccl_groups
tests_test_pipeline_nccl_groups_SOURCES = tests/test_pipeline_nccl_groups.c
tests_test_pipeline_nccl_groups_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_pipeline_nccl_groups_LDADD = $(TEST_LDADD)
TESTS += tests/test_pipeline_nccl_groups
endif

# End to end under mpirun (skipped without the mpi comm plugin), with
# comm-mpi cut to the ABI 1.3 vtable (tests/abi13/) for the refusal of a
# comm plugin without send/recv, and model-bert cut to the ABI 1.4 vtable
# (tests/abi14/) for a stage whose model keeps every gradient.
TESTS += tests/test_pipeline_mpi.sh
EXTRA_DIST += tests/test_pipeline_mpi.sh
if HAVE_MPI
check_LTLIBRARIES += tests/abi13/tfcore-comm-mpi13.la
tests_abi13_tfcore_comm_mpi13_la_SOURCES = tests/abi13/comm_mpi_abi13.c
tests_abi13_tfcore_comm_mpi13_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DCOMM_MPI_SO='"$(abs_top_builddir)/plugins/comm-mpi/.libs/tfcore-comm-mpi.so"'
tests_abi13_tfcore_comm_mpi13_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
# model-bert cut to the ABI 1.4 vtable (tests/abi14/): a stage keeps the whole gradient buffer
check_LTLIBRARIES += tests/abi14/tfcore-model-bert14.la
tests_abi14_tfcore_model_bert14_la_SOURCES = tests/abi14/model_bert_abi14.c
tests_abi14_tfcore_model_bert14_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DMODEL_BERT_SO='"$(abs_top_builddir)/plugins/model-bert/.libs/tfcore-model-bert.so"'
tests_abi14_tfcore_model_bert14_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
endif

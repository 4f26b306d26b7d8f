# core/goodput.mk — statistical efficiency and goodput (#19, docs/PARALLEL.md):
# the gradient noise scale estimated from the squared norms a step has anyway
# (core/runtime/noise_scale.c, the estimator; trainer_noise_scale.c, where the
# trainer takes them), reported in results.json and by `tfcore report`.
core_libtfcore_runtime_la_SOURCES += \
	core/runtime/noise_scale.c core/runtime/noise_scale.h \
	core/runtime/trainer_noise_scale.c core/runtime/trainer_noise_scale.h

# the estimator against synthetic gradients from N(G, Sigma) with known answers
if HAVE_CHECK
check_PROGRAMS += tests/test_noise_scale
tests_test_noise_scale_SOURCES = tests/test_noise_scale.c
tests_test_noise_scale_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_noise_scale_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_noise_scale
endif

# end to end on CPU workers under mpirun (skipped without the mpi comm
# plugin): the same estimate from every way of taking the small gradients,
# efficiency near 1 below the noise scale and low far past it, the report
EXTRA_DIST += tests/test_goodput.sh
TESTS += tests/test_goodput.sh

# plugins/backend-cpu/local.mk — backend-cpu: fp32 compute on the host
# (OpenBLAS GEMMs split over an OpenMP team, OpenMP elementwise ops), its
# Check test, the driver the torch reference test runs, and an op benchmark.
# Everything here is built only when configure found OpenBLAS.
# See plugins/backend-cpu/README.md.

BACKEND_CPU_SOURCES = \
	plugins/backend-cpu/cpu.h \
	plugins/backend-cpu/cpu_math.h \
	plugins/backend-cpu/cpu_random.h \
	plugins/backend-cpu/backend.c \
	plugins/backend-cpu/memory.c \
	plugins/backend-cpu/stream.c \
	plugins/backend-cpu/gemm.c \
	plugins/backend-cpu/gemm_bf16.c \
	plugins/backend-cpu/reduce.c \
	plugins/backend-cpu/layernorm.c \
	plugins/backend-cpu/attention.c \
	plugins/backend-cpu/activation.c \
	plugins/backend-cpu/dropout.c \
	plugins/backend-cpu/random.c \
	plugins/backend-cpu/elementwise.c \
	plugins/backend-cpu/embedding.c \
	plugins/backend-cpu/loss.c \
	plugins/backend-cpu/optimizer.c \
	plugins/backend-cpu/adafactor.c

# No -march: the code is baseline x86-64, and the hot loops carry AVX2 and
# AVX-512 clones that the loader picks on the machine it runs on
# (CPU_CLONES in cpu.h), so one build is safe on any x86-64 and fast on new
# ones. -fopenmp-simd makes `#pragma omp simd` work even without OpenMP;
# no -ffast-math: NaN and inf must survive (finite_check), sums keep order.
BACKEND_CPU_CFLAGS = -O3 -fno-math-errno -fno-trapping-math -fopenmp-simd
BACKEND_CPU_CPPFLAGS = -I$(top_srcdir)/plugins/backend-cpu $(OPENBLAS_CFLAGS)
BACKEND_CPU_LIBS = $(OPENBLAS_LIBS) $(ONEDNN_LIBS) $(OPENMP_CFLAGS) -lm
if HAVE_ONEDNN
BACKEND_CPU_CPPFLAGS += -DTF_HAVE_ONEDNN
endif

if HAVE_OPENBLAS
# The sources are compiled once, into a convenience library that the plugin,
# its test, the torch-comparison driver and the benchmark all link.
noinst_LTLIBRARIES += plugins/backend-cpu/libbackend-cpu.la
plugins_backend_cpu_libbackend_cpu_la_SOURCES = $(BACKEND_CPU_SOURCES)
plugins_backend_cpu_libbackend_cpu_la_CPPFLAGS = $(AM_CPPFLAGS) $(BACKEND_CPU_CPPFLAGS)
plugins_backend_cpu_libbackend_cpu_la_CFLAGS = $(AM_CFLAGS) $(BACKEND_CPU_CFLAGS)
BACKEND_CPU_LIB = plugins/backend-cpu/libbackend-cpu.la

plugin_LTLIBRARIES += plugins/backend-cpu/tfcore-backend-cpu.la
plugins_backend_cpu_tfcore_backend_cpu_la_SOURCES =
plugins_backend_cpu_tfcore_backend_cpu_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_backend_cpu_tfcore_backend_cpu_la_LIBADD = $(BACKEND_CPU_LIB) $(PLUGIN_LIBADD) \
	$(BACKEND_CPU_LIBS)

# The tests link the plugin's code directly (no loader needed) and take the
# vtable from tfcore_plugin_entry(): one program per op family
# (tests/backend-cpu/test_*.c), sharing tests/backend-cpu/fixture.h.
if HAVE_CHECK
BACKEND_CPU_TEST_CPPFLAGS = $(TEST_CPPFLAGS) $(BACKEND_CPU_CPPFLAGS)
BACKEND_CPU_TEST_CFLAGS = $(AM_CFLAGS) $(BACKEND_CPU_CFLAGS)
BACKEND_CPU_TEST_LDADD = $(BACKEND_CPU_LIB) $(TEST_LDADD) $(BACKEND_CPU_LIBS)
BACKEND_CPU_TESTS = tests/backend-cpu/test_runtime tests/backend-cpu/test_gemm tests/backend-cpu/test_elementwise \
	tests/backend-cpu/test_dropout tests/backend-cpu/test_layernorm tests/backend-cpu/test_attention \
	tests/backend-cpu/test_embedding tests/backend-cpu/test_cross_entropy tests/backend-cpu/test_optimizer tests/backend-cpu/test_threads \
	tests/backend-cpu/test_gemm_bf16
check_PROGRAMS += $(BACKEND_CPU_TESTS)
TESTS += $(BACKEND_CPU_TESTS)
tests_backend_cpu_test_runtime_SOURCES = tests/backend-cpu/test_runtime.c
tests_backend_cpu_test_runtime_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_runtime_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_runtime_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_gemm_SOURCES = tests/backend-cpu/test_gemm.c
tests_backend_cpu_test_gemm_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_gemm_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_gemm_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_elementwise_SOURCES = tests/backend-cpu/test_elementwise.c
tests_backend_cpu_test_elementwise_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_elementwise_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_elementwise_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_dropout_SOURCES = tests/backend-cpu/test_dropout.c
tests_backend_cpu_test_dropout_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_dropout_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_dropout_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_layernorm_SOURCES = tests/backend-cpu/test_layernorm.c
tests_backend_cpu_test_layernorm_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_layernorm_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_layernorm_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_attention_SOURCES = tests/backend-cpu/test_attention.c
tests_backend_cpu_test_attention_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_attention_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_attention_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_embedding_SOURCES = tests/backend-cpu/test_embedding.c
tests_backend_cpu_test_embedding_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_embedding_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_embedding_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_cross_entropy_SOURCES = tests/backend-cpu/test_cross_entropy.c
tests_backend_cpu_test_cross_entropy_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_cross_entropy_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_cross_entropy_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_optimizer_SOURCES = tests/backend-cpu/test_optimizer.c
tests_backend_cpu_test_optimizer_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_optimizer_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_optimizer_LDADD = $(BACKEND_CPU_TEST_LDADD)
tests_backend_cpu_test_threads_SOURCES = tests/backend-cpu/test_threads.c
tests_backend_cpu_test_threads_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_threads_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_threads_LDADD = $(BACKEND_CPU_TEST_LDADD)
# bf16 GEMMs (gemm_bf16.c): against bf16-rounded references where this CPU
# and build have them, the refusal everywhere
tests_backend_cpu_test_gemm_bf16_SOURCES = tests/backend-cpu/test_gemm_bf16.c
tests_backend_cpu_test_gemm_bf16_CPPFLAGS = $(BACKEND_CPU_TEST_CPPFLAGS)
tests_backend_cpu_test_gemm_bf16_CFLAGS = $(BACKEND_CPU_TEST_CFLAGS)
tests_backend_cpu_test_gemm_bf16_LDADD = $(BACKEND_CPU_TEST_LDADD)
# who sizes the thread team (open_args.local_world_size, backend.threads)
check_PROGRAMS += tests/test_backend_cpu_threads
tests_test_backend_cpu_threads_SOURCES = tests/test_backend_cpu_threads.c
tests_test_backend_cpu_threads_CPPFLAGS = $(TEST_CPPFLAGS) $(BACKEND_CPU_CPPFLAGS)
tests_test_backend_cpu_threads_CFLAGS = $(AM_CFLAGS) $(BACKEND_CPU_CFLAGS)
tests_test_backend_cpu_threads_LDADD = $(BACKEND_CPU_LIB) $(TEST_LDADD) $(BACKEND_CPU_LIBS)
TESTS += tests/test_backend_cpu_threads
endif

# Runs one op on inputs from files, for tests/ref/backend_cpu_vs_torch.py.
check_PROGRAMS += tests/backend_op_driver
tests_backend_op_driver_SOURCES = tests/backend_op_driver.c
tests_backend_op_driver_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/runtime
tests_backend_op_driver_LDADD = $(BACKEND_CPU_LIB) $(TFCORE_RUNTIME_LIBS) $(BACKEND_CPU_LIBS)
TESTS += tests/ref/backend_cpu_vs_torch.py

# Op timings at BERT shapes (built by `make check`, run by hand: see its header).
check_PROGRAMS += bench/cpu_ops
bench_cpu_ops_SOURCES = bench/cpu_ops.c
bench_cpu_ops_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/runtime
bench_cpu_ops_LDADD = $(BACKEND_CPU_LIB) $(TFCORE_RUNTIME_LIBS) $(BACKEND_CPU_LIBS)
endif

EXTRA_DIST += tests/ref/backend_cpu_vs_torch.py plugins/backend-cpu/README.md tests/backend-cpu/fixture.h \
	bench/cpu_ops_torch.py

# plugins/backend-cuda/local.mk — backend-cuda: NVIDIA GPUs through
# cuBLASLt and CUDA kernels (tfcore-backend-cuda.so, plugin name "cuda"),
# its op tests and the compute-sanitizer run. Built only when configure found
# the CUDA toolkit (HAVE_CUDA); the sources are in the tarball either way.
# See plugins/backend-cuda/README.md.
#
# Automake and libtool know nothing of CUDA. The .cu files are compiled by
# the suffix rule below: libtool's compile mode (so the objects are proper
# .lo files, PIC, in .libs/) running nvcc through scripts/nvcc-libtool.sh,
# which turns libtool's gcc flags (-fPIC) into nvcc's (-Xcompiler -fPIC) and
# configure's CUDA_ARCHS ("80;90") into -gencode flags, machine code for each
# architecture plus PTX for the highest. The objects are linked into the
# plugin through LIBADD. The C files are compiled by gcc as usual.

BACKEND_CUDA_C_FILES = \
	plugins/backend-cuda/backend_cuda.h \
	plugins/backend-cuda/fused_kernels.h \
	plugins/backend-cuda/gemm_align.h \
	plugins/backend-cuda/backend.c \
	plugins/backend-cuda/errors.c \
	plugins/backend-cuda/device.c \
	plugins/backend-cuda/config.c \
	plugins/backend-cuda/probe.c \
	plugins/backend-cuda/memory.c \
	plugins/backend-cuda/stream.c \
	plugins/backend-cuda/gemm.c \
	plugins/backend-cuda/reduce_ops.c \
	plugins/backend-cuda/fused_ops.c \
	plugins/backend-cuda/elementwise_ops.c \
	plugins/backend-cuda/embedding_ops.c \
	plugins/backend-cuda/optimizer_ops.c \
	plugins/backend-cuda/adafactor_ops.c

BACKEND_CUDA_KERNEL_FILES = \
	plugins/backend-cuda/elementwise.cu \
	plugins/backend-cuda/reduce.cu \
	plugins/backend-cuda/embedding.cu \
	plugins/backend-cuda/optimizer.cu \
	plugins/backend-cuda/adafactor.cu \
	plugins/backend-cuda/layernorm.cu \
	plugins/backend-cuda/attention.cu \
	plugins/backend-cuda/cross_entropy.cu

BACKEND_CUDA_KERNEL_OBJECTS = \
	plugins/backend-cuda/elementwise.lo \
	plugins/backend-cuda/reduce.lo \
	plugins/backend-cuda/embedding.lo \
	plugins/backend-cuda/optimizer.lo \
	plugins/backend-cuda/adafactor.lo \
	plugins/backend-cuda/layernorm.lo \
	plugins/backend-cuda/attention.lo \
	plugins/backend-cuda/cross_entropy.lo

EXTRA_DIST += $(BACKEND_CUDA_KERNEL_FILES) plugins/backend-cuda/README.md \
	scripts/nvcc-libtool.sh tests/test_backend_cuda_sanitizer.sh tests/test_gpu_ref.sh

# nvcc flags: C++17 (CUB needs it), optimized, with line info for
# compute-sanitizer and profilers (no effect on the code generated). No
# --use_fast_math: the kernels rely on IEEE division and sqrt.
BACKEND_CUDA_NVCCFLAGS = -std=c++17 -O3 -lineinfo --expt-relaxed-constexpr \
	$(AM_CPPFLAGS) -I$(top_srcdir)/plugins/backend-cuda $(CUDA_CFLAGS)

SUFFIXES = .cu
.cu.lo:
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	$(LIBTOOL) $(AM_V_lt) --tag=CC $(AM_LIBTOOLFLAGS) $(LIBTOOLFLAGS) --mode=compile \
	$(SHELL) $(top_srcdir)/scripts/nvcc-libtool.sh --cuda-archs='$(CUDA_ARCHS)' \
	$(NVCC) $(BACKEND_CUDA_NVCCFLAGS) $(NVCCFLAGS) -c -o $@ $<

# What each kernel file includes (nvcc runs without automake's dependency
# tracking).
BACKEND_CUDA_KERNEL_DEPS = plugins/backend-cuda/backend_cuda.h \
	plugins/backend-cuda/fused_kernels.h core/include/tfcore/backend.h \
	core/include/tfcore/config.h core/include/tfcore/dtype.h core/include/tfcore/error.h
$(BACKEND_CUDA_KERNEL_OBJECTS): $(BACKEND_CUDA_KERNEL_DEPS) scripts/nvcc-libtool.sh

# The GEMM operand alignment (gemm_align.h) is plain arithmetic: tested on
# every machine, with or without CUDA.
if HAVE_CHECK
check_PROGRAMS += tests/test_gemm_align
tests_test_gemm_align_SOURCES = tests/test_gemm_align.c plugins/backend-cuda/gemm_align.h
tests_test_gemm_align_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/backend-cuda
tests_test_gemm_align_LDADD = $(TEST_LDADD)
TESTS += tests/test_gemm_align
endif

if HAVE_CUDA
plugin_LTLIBRARIES += plugins/backend-cuda/tfcore-backend-cuda.la
plugins_backend_cuda_tfcore_backend_cuda_la_SOURCES = $(BACKEND_CUDA_C_FILES)
plugins_backend_cuda_tfcore_backend_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/plugins/backend-cuda $(CUDA_CFLAGS) -DTFC_CUDA_ARCHS='"$(CUDA_ARCHS)"'
plugins_backend_cuda_tfcore_backend_cuda_la_LDFLAGS = $(PLUGIN_LDFLAGS)
# -lstdc++: the kernels' host code (CUB) needs the C++ runtime, and the
# plugin is linked by the C compiler.
plugins_backend_cuda_tfcore_backend_cuda_la_LIBADD = $(BACKEND_CUDA_KERNEL_OBJECTS) \
	$(PLUGIN_LIBADD) $(CUDA_LIBS) -lstdc++ -lm
EXTRA_plugins_backend_cuda_tfcore_backend_cuda_la_DEPENDENCIES = $(BACKEND_CUDA_KERNEL_OBJECTS)

# The op suites load backend-cuda and backend-cpu through the plugin loader
# and compare them; without a usable GPU they print "SKIP: ..." and exit 77.
if HAVE_CHECK
check_PROGRAMS += tests/test_backend_cuda tests/test_backend_cuda_attention
tests_test_backend_cuda_SOURCES = tests/test_backend_cuda.c
tests_test_backend_cuda_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_backend_cuda_LDADD = $(TEST_LDADD) -lm
tests_test_backend_cuda_attention_SOURCES = tests/test_backend_cuda_attention.c
tests_test_backend_cuda_attention_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_backend_cuda_attention_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_backend_cuda tests/test_backend_cuda_attention \
	tests/test_backend_cuda_sanitizer.sh
endif
# The probe when CUDA hangs (no GPU needed): the program's own blocking
# cudaGetDeviceCount, exported so that the plugin binds to it.
check_PROGRAMS += tests/test_backend_cuda_probe
tests_test_backend_cuda_probe_SOURCES = tests/test_backend_cuda_probe.c
tests_test_backend_cuda_probe_CPPFLAGS = $(AM_CPPFLAGS)
tests_test_backend_cuda_probe_LDFLAGS = -export-dynamic
tests_test_backend_cuda_probe_LDADD = -ldl
TESTS += tests/test_backend_cuda_probe
# The transformers reference test (tests/ref/model_bert_vs_hf.py) on backend-cuda.
TESTS += tests/test_gpu_ref.sh
endif

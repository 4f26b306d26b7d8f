# core/safetensors.mk — the safetensors reader (mmap) and writer in libtfcore,
# its unit tests, the dump/copy driver used by the reference test against the
# safetensors package, and the test data. (The fuzz target and its corpus
# live in tests/fuzz/, distributed as a whole by tests/local.mk.)

core_libtfcore_la_SOURCES += core/sdk/safetensors_read.c core/sdk/safetensors_set.c core/sdk/safetensors_write.c
pkginclude_HEADERS += core/include/tfcore/safetensors.h

check_PROGRAMS += tests/test_safetensors tests/safetensors_tool
tests_test_safetensors_SOURCES = tests/test_safetensors.c
tests_test_safetensors_CPPFLAGS = $(TEST_CPPFLAGS) -DTF_SRCDIR='"$(abs_top_srcdir)"'
tests_test_safetensors_LDADD = $(TEST_LDADD)
tests_safetensors_tool_SOURCES = tests/safetensors_tool.c
tests_safetensors_tool_CPPFLAGS = $(TEST_CPPFLAGS)
tests_safetensors_tool_LDADD = $(TEST_LDADD)
TESTS += tests/test_safetensors tests/ref/safetensors_vs_hf.py tests/ref/sharded_safetensors_vs_hf.py

EXTRA_DIST += tests/ref/safetensors_vs_hf.py tests/ref/sharded_safetensors_vs_hf.py \
	tests/data/safetensors/torch_mixed.safetensors \
	tests/data/safetensors/README.md

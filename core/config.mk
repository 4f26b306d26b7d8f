# core/config.mk — the config module of libtfcore (libconfig files with
# @include, -o overrides, accessors that remember what was read, the dump)
# and the training section as Hugging Face TrainingArguments.

core_libtfcore_la_SOURCES += \
	core/sdk/config.c core/sdk/config_internal.h \
	core/sdk/config_override.c \
	core/sdk/config_dump.c \
	core/sdk/config_syntax.c \
	core/sdk/config_suggest.c \
	core/sdk/config_keys.c
# the training section is read by the trainer: the private runtime
core_libtfcore_runtime_la_SOURCES += core/runtime/training_args.c core/runtime/training_args.h

if HAVE_CHECK
check_PROGRAMS += tests/test_config tests/test_training_args
tests_test_config_SOURCES = tests/test_config.c
tests_test_config_CPPFLAGS = $(TEST_CPPFLAGS) -DTF_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_test_config_LDADD = $(TEST_LDADD)
tests_test_training_args_SOURCES = tests/test_training_args.c
tests_test_training_args_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_training_args_LDADD = $(TEST_LDADD)
TESTS += tests/test_config tests/test_training_args
endif

# test data; tests/fuzz (fuzz_config.c, corpus/config) is shipped by tests/local.mk
EXTRA_DIST += tests/data/config

# core/ — the three roles of the core, each its own folder and target:
#   core/sdk/      the SDK, libtfcore.so: what core/include/tfcore/*.h declares
#                  (errors, logging, dtypes, rng, files, config access,
#                  safetensors, tokenizer, SQuAD, hub and dataset fetching);
#                  plugins link against it, and it exports exactly those
#                  functions (core/libtfcore.sym, generated from the headers);
#   core/runtime/  libtfcore-runtime.la, private and static: registry, plan,
#                  stack, trainer, sampler, launcher; linked into the tfcore
#                  program and the tests, never installed;
#   core/cli/      the tfcore program: the verbs.
# Private headers sit beside their .c files. The SDK includes only its own and
# the public headers, the runtime adds nothing of the SDK's private ones, and
# only the CLI sees the runtime's (-I core/runtime).
# Fragments core/*.mk add their sources to one of the three.

lib_LTLIBRARIES += core/libtfcore.la
core_libtfcore_la_SOURCES = \
	core/sdk/error.c \
	core/sdk/log.c \
	core/sdk/dtype.c \
	core/sdk/plugin_kind.c \
	core/sdk/rng.c \
	core/sdk/adafactor_check.c \
	core/sdk/adamw_check.c \
	core/sdk/backend_check.c \
	core/sdk/file_atomic.c \
	core/sdk/file_read.c \
	core/sdk/file_tree.c \
	core/sdk/dataset_tokenizer.c
core_libtfcore_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTF_PLUGIN_DIR='"$(plugindir)"' \
	$(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS) $(UTF8PROC_CFLAGS)
core_libtfcore_la_LDFLAGS = -version-info $(TFCORE_LT_VERSION) -no-undefined \
	-export-symbols core/libtfcore.sym
EXTRA_core_libtfcore_la_DEPENDENCIES = core/libtfcore.sym
core_libtfcore_la_LIBADD = $(LIBCONFIG_LIBS) $(JANSSON_LIBS) $(UTF8PROC_LIBS) $(OPENMP_CFLAGS) -lm

# The exported functions: those the installed headers declare (tests/test_exports.sh
# checks the built library against them).
core/libtfcore.sym: $(pkginclude_HEADERS) core/public-symbols.sh
	$(AM_V_GEN)$(MKDIR_P) core && \
	$(SHELL) $(top_srcdir)/core/public-symbols.sh $(filter %.h,$^) >$@.tmp && mv $@.tmp $@
CLEANFILES += core/libtfcore.sym
EXTRA_DIST += core/public-symbols.sh

# The private runtime, linked statically into the tfcore program and the tests
# (TFCORE_RUNTIME_LIBS) on top of the SDK.
noinst_LTLIBRARIES += core/libtfcore-runtime.la
core_libtfcore_runtime_la_SOURCES = \
	core/runtime/clock.c core/runtime/clock.h \
	core/runtime/mkdirs.c core/runtime/mkdirs.h \
	core/runtime/registry.c core/runtime/registry.h \
	core/runtime/host_blas.c core/runtime/host_blas.h \
	core/runtime/search_path.c core/runtime/search_path.h \
	core/runtime/plan.c core/runtime/plan.h \
	core/runtime/stack.c core/runtime/stack.h \
	core/runtime/lr_schedule.c core/runtime/lr_schedule.h \
	core/runtime/sampler.c core/runtime/sampler.h \
	core/runtime/trainer.c core/runtime/trainer.h core/runtime/trainer_internal.h \
	core/runtime/trainer_eval.c \
	core/runtime/trainer_checkpoint.c \
	core/runtime/trainer_adafactor.c \
	core/runtime/trainer_memory.c \
	core/runtime/trainer_state.c core/runtime/trainer_state.h \
	core/runtime/trainer_run_output.c \
	core/runtime/trainer_run_log_resume.c \
	core/runtime/trainer_output_dir.c
core_libtfcore_runtime_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTF_PLUGIN_DIR='"$(plugindir)"' $(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS)
core_libtfcore_runtime_la_LIBADD = core/libtfcore.la $(JANSSON_LIBS) $(OPENMP_CFLAGS) -ldl -lm
TFCORE_RUNTIME_LIBS = core/libtfcore-runtime.la core/libtfcore.la

# The public headers: the ABI third-party plugins compile against.
pkginclude_HEADERS += \
	core/include/tfcore/tfcore.h \
	core/include/tfcore/error.h \
	core/include/tfcore/log.h \
	core/include/tfcore/dtype.h \
	core/include/tfcore/rng.h \
	core/include/tfcore/file.h \
	core/include/tfcore/file_read.h \
	core/include/tfcore/plugin.h \
	core/include/tfcore/config.h \
	core/include/tfcore/config_keys.h \
	core/include/tfcore/batch.h \
	core/include/tfcore/backend.h \
	core/include/tfcore/backend_check.h \
	core/include/tfcore/model.h \
	core/include/tfcore/dataset.h \
	core/include/tfcore/comm.h \
	core/include/tfcore/precision.h

bin_PROGRAMS += core/tfcore
core_tfcore_SOURCES = \
	core/cli/cli_main.c core/cli/cli.h \
	core/cli/cli_error.c \
	core/cli/cli_launch.c core/cli/cli_launch.h \
	core/cli/cli_plugins.c \
	core/cli/cli_train.c \
	core/cli/cli_bench.c \
	core/cli/cli_eval.c \
	core/cli/cli_predict.c \
	core/cli/cli_output.c
core_tfcore_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/runtime $(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS)
core_tfcore_LDADD = $(TFCORE_RUNTIME_LIBS) $(JANSSON_LIBS)

EXTRA_DIST += core/tfcore.pc.in

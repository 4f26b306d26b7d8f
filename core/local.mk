# core/ — the three roles of the core, each its own target:
#   the SDK       libtfcore.so: what core/include/tfcore/*.h declares (errors,
#                 logging, dtypes, rng, files, config access, safetensors,
#                 tokenizer, SQuAD, hub and dataset fetching); plugins link
#                 against it, and it exports exactly those functions
#                 (core/libtfcore.sym, generated from the headers);
#   the runtime   libtfcore-runtime.la, private and static: registry, plan,
#                 stack, trainer, sampler, launcher; linked into the tfcore
#                 program and the tests, never installed;
#   the CLI       the tfcore program: the verbs.
# Fragments core/*.mk add their sources to one of the three.

lib_LTLIBRARIES += core/libtfcore.la
core_libtfcore_la_SOURCES = \
	core/src/error.c \
	core/src/log.c \
	core/src/dtype.c \
	core/src/plugin_kind.c \
	core/src/rng.c \
	core/src/adafactor_check.c \
	core/src/adamw_check.c \
	core/src/backend_check.c \
	core/src/file_atomic.c \
	core/src/file_read.c \
	core/src/file_tree.c \
	core/src/dataset_tokenizer.c
core_libtfcore_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/src \
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
	core/src/clock.c core/src/clock.h \
	core/src/mkdirs.c core/src/mkdirs.h \
	core/src/registry.c core/src/registry.h \
	core/src/search_path.c core/src/search_path.h \
	core/src/plan.c core/src/plan.h \
	core/src/stack.c core/src/stack.h \
	core/src/lr_schedule.c core/src/lr_schedule.h \
	core/src/sampler.c core/src/sampler.h \
	core/src/trainer.c core/src/trainer.h core/src/trainer_internal.h \
	core/src/trainer_eval.c \
	core/src/trainer_checkpoint.c \
	core/src/trainer_adafactor.c \
	core/src/trainer_memory.c \
	core/src/trainer_state.c core/src/trainer_state.h \
	core/src/run_output.c \
	core/src/run_log_resume.c \
	core/src/trainer_output_dir.c
core_libtfcore_runtime_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/src \
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
	core/src/cli_main.c core/src/cli.h \
	core/src/cli_error.c \
	core/src/cli_plugins.c \
	core/src/cli_train.c \
	core/src/cli_bench.c \
	core/src/cli_eval.c \
	core/src/cli_predict.c \
	core/src/cli_output.c
core_tfcore_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/src $(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS)
core_tfcore_LDADD = $(TFCORE_RUNTIME_LIBS) $(JANSSON_LIBS)

EXTRA_DIST += core/tfcore.pc.in

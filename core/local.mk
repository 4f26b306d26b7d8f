# core/ — libtfcore.so (the shared library every plugin and the CLI use) and
# the tfcore command. Fragments core/*.mk add their sources to libtfcore.

lib_LTLIBRARIES += core/libtfcore.la
core_libtfcore_la_SOURCES = \
	core/src/error.c \
	core/src/log.c \
	core/src/dtype.c \
	core/src/plugin_kind.c \
	core/src/registry.c core/src/registry.h \
	core/src/search_path.c core/src/search_path.h \
	core/src/plan.c core/src/plan.h \
	core/src/stack.c core/src/stack.h \
	core/src/rng.c \
	core/src/adafactor_check.c \
	core/src/adamw_check.c \
	core/src/backend_check.c \
	core/src/file_atomic.c \
	core/src/file_read.c \
	core/src/file_tree.c \
	core/src/dataset_tokenizer.c \
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
core_libtfcore_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/src \
	-DTF_PLUGIN_DIR='"$(plugindir)"' \
	$(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS) $(UTF8PROC_CFLAGS)
core_libtfcore_la_LDFLAGS = -version-info $(TFCORE_LT_VERSION) -no-undefined
core_libtfcore_la_LIBADD = $(LIBCONFIG_LIBS) $(JANSSON_LIBS) $(UTF8PROC_LIBS) $(OPENMP_CFLAGS) -lm

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
	core/src/cli_plugins.c \
	core/src/cli_train.c \
	core/src/cli_bench.c \
	core/src/cli_eval.c \
	core/src/cli_predict.c \
	core/src/cli_output.c
core_tfcore_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/src $(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS)
core_tfcore_LDADD = core/libtfcore.la $(JANSSON_LIBS)

EXTRA_DIST += core/tfcore.pc.in

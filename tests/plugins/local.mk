# tests/plugins/ — the loader's test plugins (see test_plugin.c). Each one
# is a libtool module built only for `make check`; -rpath makes libtool
# build a shared object for a library that is never installed.
TEST_PLUGIN_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

check_LTLIBRARIES += tests/plugins/tfcore-model-good.la
tests_plugins_tfcore_model_good_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_good_la_CPPFLAGS = $(AM_CPPFLAGS)
tests_plugins_tfcore_model_good_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_good_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-badmagic.la
tests_plugins_tfcore_model_badmagic_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_badmagic_la_CPPFLAGS = $(AM_CPPFLAGS) -DRAW_DESCRIPTOR -DBAD_MAGIC -DPLUGIN_NAME='"badmagic"'
tests_plugins_tfcore_model_badmagic_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_badmagic_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-othermajor.la
tests_plugins_tfcore_model_othermajor_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_othermajor_la_CPPFLAGS = $(AM_CPPFLAGS) -DRAW_DESCRIPTOR -DOTHER_MAJOR -DPLUGIN_NAME='"othermajor"'
tests_plugins_tfcore_model_othermajor_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_othermajor_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-newerminor.la
tests_plugins_tfcore_model_newerminor_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_newerminor_la_CPPFLAGS = $(AM_CPPFLAGS) -DRAW_DESCRIPTOR -DNEWER_MINOR -DPLUGIN_NAME='"newerminor"'
tests_plugins_tfcore_model_newerminor_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_newerminor_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-shortstruct.la
tests_plugins_tfcore_model_shortstruct_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_shortstruct_la_CPPFLAGS = $(AM_CPPFLAGS) -DRAW_DESCRIPTOR -DSHORT_STRUCT -DPLUGIN_NAME='"shortstruct"'
tests_plugins_tfcore_model_shortstruct_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_shortstruct_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-unknownkind.la
tests_plugins_tfcore_model_unknownkind_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_unknownkind_la_CPPFLAGS = $(AM_CPPFLAGS) -DRAW_DESCRIPTOR -DUNKNOWN_KIND -DPLUGIN_NAME='"unknownkind"'
tests_plugins_tfcore_model_unknownkind_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_unknownkind_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-badname.la
tests_plugins_tfcore_model_badname_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_badname_la_CPPFLAGS = $(AM_CPPFLAGS) -DPLUGIN_NAME='"Bad_Name"'
tests_plugins_tfcore_model_badname_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_badname_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-misnamed.la
tests_plugins_tfcore_model_misnamed_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_misnamed_la_CPPFLAGS = $(AM_CPPFLAGS) -DPLUGIN_NAME='"other"'
tests_plugins_tfcore_model_misnamed_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_misnamed_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-noentry.la
tests_plugins_tfcore_model_noentry_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_noentry_la_CPPFLAGS = $(AM_CPPFLAGS) -DNO_ENTRY
tests_plugins_tfcore_model_noentry_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)

check_LTLIBRARIES += tests/plugins/tfcore-model-unresolved.la
tests_plugins_tfcore_model_unresolved_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_unresolved_la_CPPFLAGS = $(AM_CPPFLAGS) -DUNRESOLVED -DPLUGIN_NAME='"unresolved"'
tests_plugins_tfcore_model_unresolved_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) -Wl,--allow-shlib-undefined -Wl,--unresolved-symbols=ignore-all
tests_plugins_tfcore_model_unresolved_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-shortvtable.la
tests_plugins_tfcore_model_shortvtable_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_shortvtable_la_CPPFLAGS = $(AM_CPPFLAGS) -DSHORT_VTABLE -DPLUGIN_NAME='"shortvtable"'
tests_plugins_tfcore_model_shortvtable_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_shortvtable_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-nullslot.la
tests_plugins_tfcore_model_nullslot_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_nullslot_la_CPPFLAGS = $(AM_CPPFLAGS) -DNULL_SLOT -DPLUGIN_NAME='"nullslot"'
tests_plugins_tfcore_model_nullslot_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_nullslot_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/tfcore-model-probeno.la
tests_plugins_tfcore_model_probeno_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_tfcore_model_probeno_la_CPPFLAGS = $(AM_CPPFLAGS) -DPROBE_NO -DPLUGIN_NAME='"probeno"'
tests_plugins_tfcore_model_probeno_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_tfcore_model_probeno_la_LIBADD = core/libtfcore.la

# Plugins that end the process while being loaded, in their own folder (not
# tests/plugins/.libs, which test_registry loads in-process): a constructor
# that calls exit(0), an entry that dereferences a bad pointer. test_cli.sh
# puts the folder on the plugin path: commands that do not use them still run,
# `tfcore plugins` lists them as rejected.
check_LTLIBRARIES += tests/plugins/broken/tfcore-model-exitctor.la
tests_plugins_broken_tfcore_model_exitctor_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_broken_tfcore_model_exitctor_la_CPPFLAGS = $(AM_CPPFLAGS) -DEXIT_IN_CONSTRUCTOR -DPLUGIN_NAME='"exitctor"'
tests_plugins_broken_tfcore_model_exitctor_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_broken_tfcore_model_exitctor_la_LIBADD = core/libtfcore.la

check_LTLIBRARIES += tests/plugins/broken/tfcore-model-crashentry.la
tests_plugins_broken_tfcore_model_crashentry_la_SOURCES = tests/plugins/test_plugin.c
tests_plugins_broken_tfcore_model_crashentry_la_CPPFLAGS = $(AM_CPPFLAGS) -DCRASH_IN_ENTRY -DPLUGIN_NAME='"crashentry"'
tests_plugins_broken_tfcore_model_crashentry_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_broken_tfcore_model_crashentry_la_LIBADD = core/libtfcore.la

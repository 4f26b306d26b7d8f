# plugins/precision-tf32 — f32 storage, TF32 tensor-core GEMMs, no loss
# scaling (no dependencies). See plugins/precision-tf32/README.md.
plugin_LTLIBRARIES += plugins/precision-tf32/tfcore-precision-tf32.la
plugins_precision_tf32_tfcore_precision_tf32_la_SOURCES = plugins/precision-tf32/precision_tf32.c
plugins_precision_tf32_tfcore_precision_tf32_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/precision-fp32
plugins_precision_tf32_tfcore_precision_tf32_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_precision_tf32_tfcore_precision_tf32_la_LIBADD = $(PLUGIN_LIBADD)
EXTRA_DIST += plugins/precision-tf32/README.md

# plugins/precision-fp32 — strict fp32, no loss scaling (no dependencies).
plugin_LTLIBRARIES += plugins/precision-fp32/tfcore-precision-fp32.la
plugins_precision_fp32_tfcore_precision_fp32_la_SOURCES = plugins/precision-fp32/precision_fp32.c \
	plugins/precision-fp32/unscaled_precision.h
plugins_precision_fp32_tfcore_precision_fp32_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_precision_fp32_tfcore_precision_fp32_la_LIBADD = $(PLUGIN_LIBADD)

# plugins/precision-bf16 — bf16 compute, fp32 master weights, no loss
# scaling (no dependencies). See plugins/precision-bf16/README.md.
plugin_LTLIBRARIES += plugins/precision-bf16/tfcore-precision-bf16.la
plugins_precision_bf16_tfcore_precision_bf16_la_SOURCES = plugins/precision-bf16/precision_bf16.c
plugins_precision_bf16_tfcore_precision_bf16_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/precision-fp32
plugins_precision_bf16_tfcore_precision_bf16_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_precision_bf16_tfcore_precision_bf16_la_LIBADD = $(PLUGIN_LIBADD)
EXTRA_DIST += plugins/precision-bf16/README.md

# precision bf16 on backend-cpu (bf16 GEMMs through oneDNN) against
# transformers under torch.autocast("cpu", bfloat16); skips (77) where the
# backend has no bf16 GEMMs. The driver is model-bert's.
# tests/test_precision_bf16_cpu.sh: the quickstart and a bert-mini run in
# bf16 converge to the fp32 losses.
if HAVE_OPENBLAS
TESTS += tests/ref/model_bert_bf16_vs_autocast.py tests/test_precision_bf16_cpu.sh
endif
EXTRA_DIST += tests/ref/model_bert_bf16_vs_autocast.py tests/test_precision_bf16_cpu.sh

# plugins/precision-fp16 — fp16 compute, fp32 master weights, dynamic loss
# scaling as torch GradScaler (no dependencies). See
# plugins/precision-fp16/README.md.
#
# Also the tests and the GPU benchmark of all the precision plugins:
#   tests/test_precision          (Check) every precision plugin through the
#                                 loader, fp16's scaler step by step, with
#                                 backend-cpu for unscale_and_check
#   tests/test_precision_cpu.sh   the CLI: tf32/fp16/bf16 on backend cpu stop
#                                 before any work with one line
#   tests/test_gpu_finetune.sh    each precision converges like fp32 on a GPU
#                                 (exit 77 without one)
#   bench/gpu_vs_torch.sh         tfcore vs PyTorch on a GPU, every precision
plugin_LTLIBRARIES += plugins/precision-fp16/tfcore-precision-fp16.la
plugins_precision_fp16_tfcore_precision_fp16_la_SOURCES = \
	plugins/precision-fp16/loss_scaler.h \
	plugins/precision-fp16/loss_scaler.c \
	plugins/precision-fp16/precision_fp16.c
plugins_precision_fp16_tfcore_precision_fp16_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_precision_fp16_tfcore_precision_fp16_la_LIBADD = $(PLUGIN_LIBADD) -lm
EXTRA_DIST += plugins/precision-fp16/README.md

if HAVE_CHECK
check_PROGRAMS += tests/test_precision
tests_test_precision_SOURCES = tests/test_precision.c
tests_test_precision_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_precision_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_precision
endif
TESTS += tests/test_precision_cpu.sh tests/test_gpu_finetune.sh
EXTRA_DIST += tests/test_precision_cpu.sh tests/test_gpu_finetune.sh \
	bench/gpu_vs_torch.sh bench/gpu_torch_train_step.py

# bench/ — speed comparisons (never tests: nothing here asserts a time).
#   bench/cpu_vs_torch.sh      tfcore vs PyTorch training steps on the CPU
#   bench/eval_vs_torch.sh     tfcore vs PyTorch evaluation batches (forward only) on the CPU
#   bench/cpu_bf16_vs_torch.sh precision bf16 vs fp32, tfcore and PyTorch (autocast), training and eval
#   bench/tokenizer_vs_hf.py   tfcore's tokenizer vs the tokenizers package
#   bench/cpu_ops              backend-cpu ops one by one (with cpu_ops_torch.py)
#   bench/scaling.sh           1 worker vs 2 workers (mpi, dp-master) on the CPU
#   bench/memory_techniques.sh baseline vs gradient checkpointing vs Adafactor: time and memory by category
#   bench/pipeline.sh          pipeline 2 and 4 stages vs DDP vs 1 worker on the CPU: bubble, utilisation
#   bench/train_runs.sh        (sourced) the runs, rounds and medians scaling.sh and pipeline.sh share
#   bench/unpad_vs_torch.sh    unpadded vs padded training on ragged rows, and vs PyTorch with group_by_length
if HAVE_OPENBLAS
noinst_PROGRAMS = bench/sgemm_ceiling
bench_sgemm_ceiling_SOURCES = bench/sgemm_ceiling.c
bench_sgemm_ceiling_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/core/runtime $(OPENBLAS_CFLAGS)
bench_sgemm_ceiling_LDADD = $(TFCORE_RUNTIME_LIBS) $(OPENBLAS_LIBS)
endif
EXTRA_DIST += bench/cpu_vs_torch.sh bench/torch_train_step.py bench/scaling.sh \
	bench/eval_vs_torch.sh bench/torch_eval_step.py bench/memory_techniques.sh bench/pipeline.sh \
	bench/unpad_vs_torch.sh bench/torch_varlen_train_step.py \
	bench/cpu_bf16_vs_torch.sh
EXTRA_DIST += bench/train_runs.sh

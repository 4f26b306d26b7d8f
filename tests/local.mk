# tests/ — Check unit tests (one program per area), shell tests (*.sh),
# reference tests against torch/transformers/tokenizers (tests/ref/*.py),
# test plugins that exercise every loader rejection (tests/plugins/).
#
# A Check test program:   check_PROGRAMS += tests/test_foo
#                         tests_test_foo_SOURCES = tests/test_foo.c
#                         tests_test_foo_CPPFLAGS = $(TEST_CPPFLAGS)
#                         tests_test_foo_LDADD = $(TEST_LDADD)
#                         TESTS += tests/test_foo
TEST_CPPFLAGS = $(AM_CPPFLAGS) $(CHECK_CFLAGS) -I$(top_srcdir)/core/sdk \
	-I$(top_srcdir)/core/runtime -I$(top_srcdir)/core/cli \
	$(LIBCONFIG_CFLAGS) $(JANSSON_CFLAGS) $(UTF8PROC_CFLAGS)
TEST_LDADD = $(TFCORE_RUNTIME_LIBS) $(CHECK_LIBS) $(JANSSON_LIBS) $(LIBCONFIG_LIBS) $(UTF8PROC_LIBS)

EXTRA_DIST += tests/ref/run-python.sh tests/fuzz
# what the reference tests share: the pass/fail tally; the model-bert ones (fp32, bf16) more
EXTRA_DIST += tests/ref/model_bert_harness.py tests/ref/tally.py
# what the C tests share: plugins through the registry, seeded fills, errors,
# the runner (tests/common.h); the GPU op suites' backend pair
EXTRA_DIST += tests/common.h tests/backend_pair.h
# the test-only CUDA emulation (scripts/build-cuda-emu.sh, scripts/test-emulated-gpu.sh)
EXTRA_DIST += tests/cuda-emu

check_PROGRAMS += tests/test_abi tests/test_registry
tests_test_abi_SOURCES = tests/test_abi.c
tests_test_abi_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_abi_LDADD = $(TEST_LDADD)
tests_test_registry_SOURCES = tests/test_registry.c
tests_test_registry_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_registry_LDADD = $(TEST_LDADD)
TESTS += tests/test_abi tests/test_registry
EXTRA_DIST += tests/plugins/test_plugin.c
TESTS += tests/test_plugin_template.sh
EXTRA_DIST += tests/test_plugin_template.sh
# libtfcore.so exports exactly what the public headers declare (the SDK)
TESTS += tests/test_exports.sh
EXTRA_DIST += tests/test_exports.sh
# core/sdk, core/runtime, core/cli depend one way, and nothing loops
TESTS += tests/test_layout.sh
EXTRA_DIST += tests/test_layout.sh

check_PROGRAMS += tests/test_schedule
tests_test_schedule_SOURCES = tests/test_schedule.c
tests_test_schedule_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_schedule_LDADD = $(TEST_LDADD) -lm
TESTS += tests/test_schedule
TESTS += tests/test_cli.sh
EXTRA_DIST += tests/test_cli.sh
# what a verb tells the launcher (core/cli/cli_launch.c, compiled in)
check_PROGRAMS += tests/test_cli_launch
tests_test_cli_launch_SOURCES = tests/test_cli_launch.c core/cli/cli_launch.c
tests_test_cli_launch_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cli_launch_LDADD = $(TEST_LDADD)
TESTS += tests/test_cli_launch
# TFCORE_REQUIRE_GPU=1: the GPU tests fail instead of skipping, saying why
# (tests/gpu_backend.sh for the shell tests, tests/gpu_required.h for the C ones).
TESTS += tests/test_gpu_required.sh
EXTRA_DIST += tests/test_gpu_required.sh tests/gpu_backend.sh tests/gpu_required.h
# scripts/gpu-run.sh's step runner and its no-GPU stop (scripts/gpu-steps.sh)
TESTS += tests/test_gpu_run.sh
EXTRA_DIST += tests/test_gpu_run.sh scripts/gpu-run.sh scripts/gpu-steps.sh scripts/gpu-bundle.sh
# The relocatable GPU bundle, packed from this build, moved, and run from the
# copy without a GPU (skips where backend-cuda is not built; docs/GPU.md)
TESTS += tests/test_gpu_bundle.sh
EXTRA_DIST += tests/test_gpu_bundle.sh
# The gate on backend-cuda's compiled kernels: shared memory, registers x
# launch size, spills (ptxas's report; skips where backend-cuda is not built)
TESTS += tests/test_cuda_resources.sh
EXTRA_DIST += tests/test_cuda_resources.sh tests/cuda_resources_check.py tests/data/cuda-resources
TESTS += tests/ref/trainer_vs_torch.py
EXTRA_DIST += tests/ref/trainer_vs_torch.py
# training.group_by_length's order against transformers' get_length_grouped_indices
check_PROGRAMS += tests/length_group_tool
tests_length_group_tool_SOURCES = tests/length_group_tool.c
tests_length_group_tool_CPPFLAGS = $(TEST_CPPFLAGS)
tests_length_group_tool_LDADD = $(TEST_LDADD)
TESTS += tests/ref/length_grouped_vs_transformers.py
EXTRA_DIST += tests/ref/length_grouped_vs_transformers.py
TESTS += tests/test_group_by_length.sh
EXTRA_DIST += tests/test_group_by_length.sh
TESTS += tests/test_train.sh
EXTRA_DIST += tests/test_train.sh
TESTS += tests/test_bad_input.sh
EXTRA_DIST += tests/test_bad_input.sh
# `tfcore bench --eval` times the evaluation's work (forward-only batches)
TESTS += tests/test_bench_eval.sh
EXTRA_DIST += tests/test_bench_eval.sh
TESTS += tests/test_host_blas.sh
EXTRA_DIST += tests/test_host_blas.sh
# preemption: a stop signal mid-run saves a checkpoint, exits 75, resumes exactly
TESTS += tests/test_preempt.sh
EXTRA_DIST += tests/test_preempt.sh
# preflight: ranks started with another -o value or data file stop before step 1
TESTS += tests/test_preflight.sh
EXTRA_DIST += tests/test_preflight.sh
# collective timeouts: a stalled rank of mpi, the process launcher or dp-master
# ends the job within comm.timeout_s + 30 s, named by the flight recorder
TESTS += tests/test_comm_timeout.sh
EXTRA_DIST += tests/test_comm_timeout.sh
TESTS += tests/test_trainer_options.sh
EXTRA_DIST += tests/test_trainer_options.sh
TESTS += tests/test_predict_checks.sh
EXTRA_DIST += tests/test_predict_checks.sh
TESTS += tests/test_eval.sh
EXTRA_DIST += tests/test_eval.sh
# backend-cpu cut to the ABI 1.1 vtable, for test_trainer_options.sh (tests/abi11/)
check_LTLIBRARIES += tests/abi11/tfcore-backend-cpu11.la
tests_abi11_tfcore_backend_cpu11_la_SOURCES = tests/abi11/backend_cpu_abi11.c
tests_abi11_tfcore_backend_cpu11_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DBACKEND_CPU_SO='"$(abs_top_builddir)/plugins/backend-cpu/.libs/tfcore-backend-cpu.so"'
tests_abi11_tfcore_backend_cpu11_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
TESTS += tests/test_file_safety.sh
check_PROGRAMS += tests/test_file
tests_test_file_SOURCES = tests/test_file.c
tests_test_file_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_file_LDADD = $(TEST_LDADD)
TESTS += tests/test_file
EXTRA_DIST += tests/test_file_safety.sh tests/fault_rename.c
# kill -9 and failed writes during checkpoint saves (tests/fault_io.c, LD_PRELOAD)
TESTS += tests/test_checkpoint_faults.sh
EXTRA_DIST += tests/test_checkpoint_faults.sh tests/fault_io.c
# plugin READMEs' config-key sections against the plugins' key tables
TESTS += tests/test_plugin_keys.sh
EXTRA_DIST += tests/test_plugin_keys.sh scripts/plugin-readme-keys.sh
# models by Hugging Face name against a loopback hub (tests/hub_server.py)
TESTS += tests/test_hub.sh
EXTRA_DIST += tests/test_hub.sh tests/hub_server.py tests/hub_fixture.py tests/loopback_http.py
# comm mpi across hosts: network namespaces as machines (tests/netns_hosts.sh)
TESTS += tests/test_multihost.sh
EXTRA_DIST += tests/test_multihost.sh tests/netns_hosts.sh tests/mpi_test_harness.sh
# tfcore under a real one-node Slurm (srun, sbatch, scancel; tests/slurm_cluster.sh)
TESTS += tests/test_slurm.sh
EXTRA_DIST += tests/test_slurm.sh tests/slurm_cluster.sh tests/slurm_harness.sh
# two Slurm nodes in two network namespaces (srun across them; mpirun inside a 2-node allocation)
TESTS += tests/test_slurm_nodes.sh
EXTRA_DIST += tests/test_slurm_nodes.sh
# datasets by name (imdb, squad) against a loopback file server (tests/dataset_server.py)
TESTS += tests/test_datasets.sh
EXTRA_DIST += tests/test_datasets.sh tests/dataset_server.py tests/dataset_fixture.py

# test_plugin_template.sh installs the build tree into a DESTDIR, and libtool
# relinks the plugins in their .libs while it does: run it after every other
# test, never beside one that loads plugins.
tests/test_plugin_template.log: $(filter-out tests/test_plugin_template.log,$(TEST_LOGS))

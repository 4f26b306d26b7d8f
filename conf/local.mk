# conf/ — ready experiments, shipped and installed as examples. The
# experiments @include their shared bases from base/ (relative to the folder
# of the config given to tfcore), so base/ is installed next to them.
confdir = $(pkgdatadir)/conf
dist_conf_DATA = conf/quickstart.cfg conf/quickstart-minilm.cfg \
	conf/imdb_1gpu.cfg conf/imdb_dp2.cfg conf/imdb_dp4.cfg \
	conf/imdb_ddp2.cfg conf/imdb_ddp4.cfg conf/imdb_mpi4.cfg \
	conf/imdb_fp16.cfg conf/imdb_bf16.cfg \
	conf/squad_1gpu.cfg conf/squad_ddp4.cfg \
	conf/cpu_dp2.cfg conf/cpu_mpi2.cfg \
	conf/squad_v2_ddp4.cfg conf/squad_v2_pipe2.cfg conf/squad_v2_pipe4.cfg \
	conf/cpu_pipe2.cfg conf/cpu_pipe4.cfg \
	conf/README.md
confslurmdir = $(pkgdatadir)/conf/slurm
dist_confslurm_DATA = conf/slurm/train.sbatch conf/slurm/srun-tasks.sbatch conf/slurm/nodes.sbatch \
	conf/slurm/gpu-nccl.sbatch
confbasedir = $(pkgdatadir)/conf/base
dist_confbase_DATA = conf/base/handson_training.cfg conf/base/imdb_bert_base.cfg \
	conf/base/squad_bert_base.cfg conf/base/squad_v2_bert_base.cfg \
	conf/base/cpu_synthetic.cfg conf/base/cpu_training.cfg

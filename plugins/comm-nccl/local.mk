# plugins/comm-nccl/local.mk — build rules for plugins/comm-nccl (being written)

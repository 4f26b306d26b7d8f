# plugins/comm-mpi/local.mk — build rules for plugins/comm-mpi (being written)

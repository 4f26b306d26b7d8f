# plugins/comm-dp-master/local.mk — build rules for plugins/comm-dp-master (being written)

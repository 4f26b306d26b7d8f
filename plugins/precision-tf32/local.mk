# plugins/precision-tf32/local.mk — build rules for plugins/precision-tf32 (being written)

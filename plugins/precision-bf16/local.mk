# plugins/precision-bf16/local.mk — build rules for plugins/precision-bf16 (being written)

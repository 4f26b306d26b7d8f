# plugins/precision-fp16/local.mk — build rules for plugins/precision-fp16 (being written)

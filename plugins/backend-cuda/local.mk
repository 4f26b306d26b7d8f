# plugins/backend-cuda/local.mk — build rules for plugins/backend-cuda (being written)

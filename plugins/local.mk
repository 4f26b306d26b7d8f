# plugins/local.mk
# plugins/ — one folder per plugin; each folder's local.mk builds its .so

# tests/comm-shm/local.mk — build rules for tests/comm-shm (being written)

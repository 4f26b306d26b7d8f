# core/parallel.mk — a job of several workers: who each worker is
# (worker.h), how they are started and stopped together (launch.c), the
# trainer's collectives (trainer_comm.c) and DDP's overlapped gradient
# buckets (grad_buckets.c). The comm plugins themselves live in plugins/comm-*.
core_libtfcore_la_SOURCES += \
	core/src/worker.h \
	core/src/launch.c core/src/launch.h \
	core/src/trainer_comm.c \
	core/src/grad_buckets.c core/src/grad_buckets.h

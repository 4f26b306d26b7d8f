# core/parallel.mk — workers, launchers, gradient buckets (being written)

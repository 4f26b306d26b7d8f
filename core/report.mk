# core/report.mk — tfcore report (being written)

# core/report.mk — `tfcore report`: runs' results.json compared as a Markdown
# (or JSON) table and an SVG chart. Code of the tfcore command only (nothing a
# plugin needs), so it goes into the CLI, not libtfcore.
core_tfcore_SOURCES += \
	core/cli/cli_report.c \
	core/cli/report_table.c core/cli/report_table.h \
	core/cli/report_svg.c
core_tfcore_LDADD += -lm

# tests/test_report.sh: fixture runs (hand-written results.json files) and
# the exact tables they must give.
TESTS += tests/test_report.sh
EXTRA_DIST += tests/test_report.sh \
	tests/data/report/1gpu/results.json \
	tests/data/report/dp2/results.json \
	tests/data/report/ddp2/results.json \
	tests/data/report/old-format/results.json \
	tests/data/report/malformed/results.json \
	tests/data/report/squad-1gpu/results.json \
	tests/data/report/squad-ddp4/results.json \
	tests/data/report/expected-imdb.md \
	tests/data/report/expected-imdb-baseline3.md \
	tests/data/report/expected-imdb-train_loss.md \
	tests/data/report/expected-squad.md \
	tests/data/report/expected-imdb.json \
	tests/data/report/mem-base/results.json \
	tests/data/report/mem-ckpt/results.json \
	tests/data/report/mem-adafactor/results.json \
	tests/data/report/expected-memory.md \
	tests/data/report/pipe-one/results.json \
	tests/data/report/pipe-2x8/results.json \
	tests/data/report/pipe-2x2/results.json \
	tests/data/report/expected-pipeline.md \
	tests/data/report/stats-one/results.json \
	tests/data/report/stats-small/results.json \
	tests/data/report/stats-big/results.json \
	tests/data/report/expected-statistics.md

# tests/test_conf.sh: every config in conf/ resolves (tfcore train --dry-run).
TESTS += tests/test_conf.sh
EXTRA_DIST += tests/test_conf.sh

# docs/ — installed to $(docdir)
dist_doc_DATA += docs/ARCHITECTURE.md docs/PLUGINS.md
dist_doc_DATA += docs/REPORT.md
dist_doc_DATA += docs/PARALLEL.md
dist_doc_DATA += docs/GPU.md

# examples/ — shipped in the tarball; built by tests/test_plugin_template.sh
# against a DESTDIR install, as a third party would.
EXTRA_DIST += examples/plugin-template/fixed_scale.c examples/plugin-template/Makefile \
	examples/plugin-template/README.md

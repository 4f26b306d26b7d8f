# conf/ — ready experiments, shipped and installed as examples.
confdir = $(pkgdatadir)/conf
dist_conf_DATA = conf/quickstart.cfg conf/quickstart-minilm.cfg

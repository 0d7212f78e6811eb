"""KubeSphere installer engine: reconciles the ClusterConfiguration module by module."""

#: The KubeSphere release this installer installs (the cc's ``version`` label and ``status.core.version``).
KS_VERSION = "v3.4.1"

# ks-installer image: shell-operator running the Python hook, which drives ansible-runner.
# Build it with `hack/image.sh build` (buildah, no daemon); any OCI builder works with the defaults below.
# The base images are build arguments: where no registry is reachable, hack/image.sh passes stand-ins it makes from
# Debian bookworm (python3 3.11) and from hack/build-tools.sh's cached binaries.
#
# The image itself is built on an empty base (docs/image.md): the build stage installs the engine into a virtualenv
# on Debian bookworm, then hack/image_rootfs.py copies out only what the installer runs, and hack/image_sbom.py lists
# where each file came from (/opt/ks-installer/sbom.spdx.json). No shell: shell-operator starts the hook
# (hooks/kubesphere/installRunner.py) by its `#!/usr/bin/env python3` line and runs jq as a program, Ansible runs
# only action plugins on the local connection (no module is shipped to a shell), so the image has /usr/bin/env but
# no sh or bash; `ls` and `cat` stay for KubeKey, which `kubectl exec`s them in the pod (docs/clients.md). No pip,
# apt or dpkg, no setuid or setgid file.
ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm

# shell-operator is built from its pinned Go module by the same script the tests use (hack/build-tools.sh; it
# builds only what /out lacks).
FROM ${GO_IMAGE} AS tools
WORKDIR /src
COPY hack/build-tools.sh hack/versions.env hack/
RUN KS_TOOLS_DIR=/out bash hack/build-tools.sh shell-operator \
 && cd /out && for f in *-v*; do mv "$f" "${f%-v*}"; done

FROM ${DEBIAN_IMAGE} AS build
# Extra pip options for the install below (hack/image.sh: a wheel directory when PyPI is not reachable from the build).
ARG PIP_INSTALL_OPTS=""
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
# jq: shell-operator evaluates the bindings' jqFilter with the jq binary.
RUN if ! dpkg -s python3 python3-venv jq ca-certificates >/dev/null 2>&1; then \
      apt-get update && apt-get install -y --no-install-recommends python3 python3-venv jq ca-certificates \
      && rm -rf /var/lib/apt/lists/*; fi

# The engine in its own virtualenv, without pip, setuptools and Ansible's test tooling.
COPY pyproject.toml /src/
COPY installer/ /src/installer/
RUN python3 -m venv /opt/ks-installer/venv \
 && /opt/ks-installer/venv/bin/pip install --no-cache-dir --disable-pip-version-check $PIP_INSTALL_OPTS /src \
 && /opt/ks-installer/venv/bin/pip uninstall -y -q pip setuptools \
 && rm -rf /opt/ks-installer/venv/lib/python3*/site-packages/ansible_test /opt/ks-installer/venv/bin/ansible-test

COPY hack/image_rootfs.py hack/image_sbom.py hack/versions.env /src/hack/
COPY --from=tools /out/shell-operator /rootfs/shell-operator
RUN python3 /src/hack/image_rootfs.py /rootfs \
 && . /src/hack/versions.env \
 && /opt/ks-installer/venv/bin/python3 -I /src/hack/image_sbom.py /rootfs /rootfs/opt/ks-installer/sbom.spdx.json \
      "shell-operator=$SHELL_OPERATOR_VERSION:/shell-operator"

# The code is root's and read-only; what the installer writes is /kubesphere (results, cache, run dirs,
# playbooks/kubesphere_running), /tmp (shell-operator's tmp dir, the engine's fork server) and $HOME: volumes in
# deploy/kubesphere-installer.yaml, so the root filesystem can be read-only.
COPY hooks/ /rootfs/hooks/
COPY roles/ /rootfs/opt/ks-installer/roles/
COPY playbooks/ /rootfs/opt/ks-installer/playbooks/
RUN python3 -m compileall -q -s /rootfs -p / --invalidation-mode unchecked-hash /rootfs/opt/ks-installer/roles \
 && chmod 0755 /rootfs/hooks/kubesphere/*.py \
 && cd /rootfs && mkdir -p kubesphere/results kubesphere/cache kubesphere/run kubesphere/playbooks tmp/shell-operator \
      home/kubesphere \
 && chown -R 1002:1002 kubesphere tmp/shell-operator home/kubesphere

FROM scratch
COPY --from=build /rootfs/ /

ENV LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/ks-installer/venv/bin:/usr/bin \
    SHELL_OPERATOR_HOOKS_DIR=/hooks \
    SHELL_OPERATOR_TMP_DIR=/tmp/shell-operator \
    DEBUG_UNIX_SOCKET=/tmp/shell-operator/debug.socket \
    KS_BASE_DIR=/kubesphere \
    KS_ROLES_DIR=/opt/ks-installer/roles \
    KS_RESULTS_DIR=/kubesphere/results \
    ANSIBLE_ROLES_PATH=/opt/ks-installer/roles \
    HOME=/home/kubesphere

USER 1002
WORKDIR /kubesphere
# The pod log as KubeSphere's docs show it: the hook's lines as printed, the operator's as "TIME LEVEL : msg"
# (installer/podlog.py; KS_POD_LOG_FORMAT=json keeps shell-operator's JSON lines).
ENTRYPOINT ["/opt/ks-installer/venv/bin/python3", "-I", "-m", "installer.podlog", "/shell-operator"]
CMD ["start"]

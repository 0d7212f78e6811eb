# ks-installer image: shell-operator running the Python hook, which drives ansible-runner.
# Build it with `hack/image.sh build` (buildah, no daemon); any OCI builder works with the defaults below.
# The base images are build arguments: where no registry is reachable, hack/image.sh passes stand-ins it makes from
# Debian bookworm (python3 3.11) and from hack/build-tools.sh's cached binaries.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm

# Tools are built from pinned Go modules by the same script the tests use (hack/build-tools.sh; it builds only
# what /out lacks).
FROM ${GO_IMAGE} AS tools
WORKDIR /src
COPY hack/build-tools.sh hack/versions.env hack/
RUN KS_TOOLS_DIR=/out bash hack/build-tools.sh shell-operator kubectl helm \
 && cd /out && for f in *-v*; do mv "$f" "${f%-v*}"; done

FROM ${PYTHON_IMAGE}
# Extra pip options for the install below (hack/image.sh: a wheel directory when PyPI is not reachable from the build).
ARG PIP_INSTALL_OPTS=""
ENV LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/ks-installer/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# jq: shell-operator evaluates the bindings' jqFilter with the jq binary.
RUN if ! dpkg -s jq ca-certificates >/dev/null 2>&1; then \
      apt-get update && apt-get install -y --no-install-recommends jq ca-certificates \
      && rm -rf /var/lib/apt/lists/*; fi \
 && useradd --uid 1002 --create-home kubesphere
COPY --from=tools /out/shell-operator /shell-operator
COPY --from=tools /out/kubectl /out/helm /usr/local/bin/

# The engine in its own virtualenv, without pip, setuptools, caches and Ansible's test tooling.
COPY pyproject.toml /src/
COPY installer/ /src/installer/
RUN python3 -m venv /opt/ks-installer/venv \
 && /opt/ks-installer/venv/bin/pip install --no-cache-dir --disable-pip-version-check $PIP_INSTALL_OPTS /src \
 && /opt/ks-installer/venv/bin/pip uninstall -y -q pip setuptools \
 && rm -rf /src /root/.cache /opt/ks-installer/venv/lib/python3*/site-packages/ansible_test

# The code is root's and read-only; what the installer writes is /kubesphere (results, cache, run dirs,
# playbooks/kubesphere_running), /tmp (shell-operator's tmp dir, the engine's fork server) and $HOME: volumes in
# deploy/kubesphere-installer.yaml, so the root filesystem can be read-only.
COPY hooks/ /hooks/
COPY roles/ /opt/ks-installer/roles/
COPY playbooks/ /opt/ks-installer/playbooks/
RUN python3 -m compileall -q /opt/ks-installer/roles \
 && chmod +x /hooks/kubesphere/*.py \
 && mkdir -p /kubesphere/results /kubesphere/cache /kubesphere/run /kubesphere/playbooks /tmp/shell-operator \
 && chown -R kubesphere:kubesphere /kubesphere /tmp/shell-operator

ENV SHELL_OPERATOR_HOOKS_DIR=/hooks \
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

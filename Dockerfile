# ks-installer image: shell-operator running the Python hook, which drives ansible-runner.
# Tools are built from pinned Go modules by the same script the tests use (hack/build-tools.sh).

FROM golang:1.26-bookworm AS tools
WORKDIR /src
COPY hack/build-tools.sh hack/versions.env hack/
RUN KS_TOOLS_DIR=/out bash hack/build-tools.sh shell-operator kubectl helm \
 && cd /out && for f in *-v*; do mv "$f" "${f%-v*}"; done

FROM python:3.11-slim-bookworm
# jq: shell-operator evaluates the bindings' jqFilter with the jq binary.
RUN apt-get update \
 && apt-get install -y --no-install-recommends jq ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 1002 --create-home kubesphere
COPY --from=tools /out/shell-operator /shell-operator
COPY --from=tools /out/kubectl /out/helm /usr/local/bin/

WORKDIR /src
COPY pyproject.toml README.md ./
COPY installer/ installer/
RUN pip install --no-cache-dir . && rm -rf /src

COPY hooks/ /hooks/
COPY playbooks/ /kubesphere/playbooks/
COPY roles/ /kubesphere/installer/roles/
RUN python -m compileall -q /hooks /kubesphere/playbooks /kubesphere/installer/roles \
 && mkdir -p /kubesphere/results /tmp/shell-operator \
 && chmod +x /hooks/kubesphere/*.py \
 && chown -R kubesphere:kubesphere /kubesphere /hooks /tmp/shell-operator

ENV SHELL_OPERATOR_HOOKS_DIR=/hooks \
    SHELL_OPERATOR_TMP_DIR=/tmp/shell-operator \
    KS_BASE_DIR=/kubesphere \
    KS_PLAYBOOKS_DIR=/kubesphere/playbooks \
    KS_ROLES_DIR=/kubesphere/installer/roles \
    KS_RESULTS_DIR=/kubesphere/results \
    ANSIBLE_ROLES_PATH=/kubesphere/installer/roles \
    HOME=/home/kubesphere

USER 1002
WORKDIR /kubesphere
ENTRYPOINT ["/shell-operator"]
CMD ["start"]

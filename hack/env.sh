# Shared setup for hack/test.sh and hack/demo.sh (sourced).

ensure_system_packages() {
  local missing=()
  command -v jq >/dev/null || missing+=(jq)          # shell-operator evaluates jqFilter with the jq binary
  command -v go >/dev/null || missing+=(golang-go)
  python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[setup] installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

ensure_tools() {
  local start=$SECONDS
  bash hack/build-tools.sh
  echo "[setup] simulated cluster binaries ready ($((SECONDS - start))s)" >&2
}

ensure_venv() {
  local stamp=.venv/.installed-compat
  if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
  if [ ! -f $stamp ] || [ pyproject.toml -nt $stamp ]; then
    # compat: a plain path in a .pth file, as cheap to a hook's interpreter start as the image's regular install
    # (the default editable finder costs every interpreter about 9 ms of imports)
    .venv/bin/pip install -q --disable-pip-version-check --config-settings editable_mode=compat -e '.[test]'
    touch $stamp
  fi
  # The project's own code byte-compiled, so that each engine, ansible-playbook and task process (PYTHONDONTWRITEBYTECODE
  # or not) loads it instead of compiling it again; pip compiled the dependencies.
  .venv/bin/python -m compileall -q installer hooks plugins roles tests hack >/dev/null
  export PATH="$PWD/.venv/bin:$PATH"
}

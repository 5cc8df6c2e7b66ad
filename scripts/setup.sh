#!/usr/bin/env bash
# Installs what `make test` and `make run` need and is missing: Debian packages (only when
# running as root; otherwise prints the exact command) and the Python test tools, which go
# into the project-local virtualenv .venv/. Safe to run again: it does nothing when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev
              liburing-dev libcpp-httplib-dev libpcre2-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev clang-format python3 python3-venv
              python3-pip unzip)
missing=()
for pkg in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    # A python3 that is not Debian's (pyenv, conda) still does the job if it can make a venv.
    case "$pkg" in
      python3|python3-venv|python3-pip)
        command -v python3 >/dev/null && python3 -c "import venv, ensurepip" 2>/dev/null && continue ;;
    esac
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "setup: missing Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

requirements=tools/requirements.txt
stamp=.venv/.requirements-installed
if [[ ! -f $stamp || $requirements -nt $stamp ]]; then
  echo "setup: preparing the Python virtualenv .venv (test tools from PyPI)"
  [[ -x .venv/bin/python ]] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
fi

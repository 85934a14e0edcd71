#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for Compass: installs the missing Debian packages
# (idempotent: only what is absent), then configures and builds the release preset.
# Usage: tools/setup.sh            (from anywhere; builds in build/release)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config git
          libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
          libsimgrid-dev libopenblas-pthread-dev python3 python3-pip python3-venv python3-matplotlib python3-yaml
          clang libclang-rt-14-dev
          openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# CUTLASS/CuTe headers for the fused GEMM kernels come from the nvidia-cutlass wheel (its
# cutlass_library/source/include); only the headers are used, so its Python dependencies are
# not installed. Debian's Python refuses system-wide pip installs unless told otherwise.
if ! python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("cutlass_library") is None)' 2>/dev/null; then
  echo "setup: installing the nvidia-cutlass headers (pip)" >&2
  python3 -m pip install -q --no-deps nvidia-cutlass ||
    python3 -m pip install -q --no-deps --break-system-packages nvidia-cutlass
fi

# Python: pytest runs the tpcompass tests in CTest (pandas: the results' records become
# DataFrames there; tqdm: the package's progress bars); scikit-build-core and nanobind build the package with `pip install .`
# (pip fetches them itself too, but having them speeds rebuilds).
python_pkgs=("scikit-build-core>=0.10" "nanobind>=2.0" "pytest>=7" "pyyaml" "pandas" "tqdm>=4")
if ! python3 -c "import scikit_build_core, nanobind, pytest, yaml, pandas, tqdm" >/dev/null 2>&1; then
  echo "setup: installing ${python_pkgs[*]} with pip" >&2
  python3 -m pip install -q "${python_pkgs[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${python_pkgs[@]}"
fi

# The CUDA toolkit is optional: when nvcc is present the CUDA backend is built too.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ ! -f build/release/build.ninja ]; then
  cmake --preset release >/dev/null
fi
cmake --build --preset release -- -j"$(nproc)" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }

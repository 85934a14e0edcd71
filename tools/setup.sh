#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for Compass: installs the missing Debian packages (and the
# Python packages the chosen parts need; idempotent: only what is absent), then configures the
# release preset and builds into build/release.
#
# Usage: tools/setup.sh [--tests] [--fused] | --python     (from anywhere)
#   (no option)  the compass command line only: what `build/release/compass plan` needs
#   --tests      also the tests and benchmarks: everything `ctest --preset release` runs
#   --fused      also the fused CUTLASS CUDA kernels where no GPU is visible (they are built
#                anyway when `nvidia-smi -L` lists a GPU and nvcc is present)
#   --python     only the Debian packages `pip install .` needs (its planning build); no build
# --tests and --fused stay on for later runs (the build directory remembers them).
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0
fused=0
python_only=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    --fused) fused=1 ;;
    --python) python_only=1 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: error: unknown option '$arg' (see tools/setup.sh --help)" >&2; exit 2 ;;
  esac
done

cache=build/release/CMakeCache.txt
cache_value() {  # the value of a cache variable in build/release, empty when not configured
  [ -f "$cache" ] && sed -n "s/^$1:[A-Z]*=//p" "$cache" || true
}
# Options given on an earlier run stay on.
[ "$(cache_value COMPASS_BUILD_TESTS)" = "ON" ] && tests=1
[ "$(cache_value COMPASS_FUSED_KERNELS)" = "ON" ] && fused=1

# The CUDA toolkit is optional: when nvcc is present the CUDA backend is built too.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# The fused kernels are built where a GPU can run them (the CMake default, AUTO) or when asked.
want_cutlass=0
if command -v nvcc >/dev/null 2>&1; then
  if ((fused)) || { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
    want_cutlass=1
  fi
fi

# Debian packages: the command line needs the first list; the tests, benchmarks, fuzzers and
# `compass plot` the second; the Python package's planning build (pyproject.toml) the third.
packages=(cmake ninja-build g++ pkg-config git
          libcli11-dev nlohmann-json3-dev libfmt-dev
          libsimgrid-dev libopenblas-pthread-dev openmpi-bin libopenmpi-dev python3)
if ((python_only)); then
  packages=(cmake ninja-build g++ pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev
            python3 python3-dev python3-pip python3-venv)
  tests=0
  want_cutlass=0
fi
if ((tests)); then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
             python3-pip python3-venv python3-matplotlib python3-yaml)
fi
if ((want_cutlass)); then packages+=(python3-pip); fi
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

((python_only)) && exit 0

pip_install() {  # Debian's Python refuses system-wide pip installs unless told otherwise
  python3 -m pip install -q "$@" 2>/dev/null || python3 -m pip install -q --break-system-packages "$@"
}

# CUTLASS/CuTe headers for the fused GEMM kernels come from the nvidia-cutlass wheel (its
# cutlass_library/source/include); only the headers are used, so its Python dependencies are
# not installed.
if ((want_cutlass)) &&
   ! python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("cutlass_library") is None)' 2>/dev/null; then
  echo "setup: installing the nvidia-cutlass headers (pip)" >&2
  pip_install --no-deps nvidia-cutlass
fi

# Python for the tests: pytest runs the tpcompass tests in CTest (pandas: the results' records
# become DataFrames there; tqdm: the package's progress bars; matplotlib: tpcompass.plot);
# scikit-build-core and nanobind build the package with `pip install .` (pip fetches them itself
# too, but having them speeds rebuilds).
if ((tests)); then
  python_pkgs=("scikit-build-core>=0.10" "nanobind>=2.0" "pytest>=7" "pyyaml" "pandas" "tqdm>=4"
               "matplotlib>=3.5")
  if ! python3 -c "import scikit_build_core, nanobind, pytest, yaml, pandas, tqdm, matplotlib" >/dev/null 2>&1; then
    echo "setup: installing ${python_pkgs[*]} with pip" >&2
    pip_install "${python_pkgs[@]}"
  fi
fi

# Configure when the build directory is new or an option changed.
want_tests=OFF
((tests)) && want_tests=ON
defines=(-DCOMPASS_BUILD_TESTS="$want_tests" -DCOMPASS_BUILD_BENCH="$want_tests")
changed=0
[ "$(cache_value COMPASS_BUILD_TESTS)" = "$want_tests" ] || changed=1
[ "$(cache_value COMPASS_BUILD_BENCH)" = "$want_tests" ] || changed=1
if command -v nvcc >/dev/null 2>&1; then  # the option exists only in CUDA builds
  want_fused=AUTO
  ((fused)) && want_fused=ON
  defines+=(-DCOMPASS_FUSED_KERNELS="$want_fused")
  [ "$(cache_value COMPASS_FUSED_KERNELS)" = "$want_fused" ] || changed=1
fi
if [ ! -f build/release/build.ninja ] || ((changed)); then
  cmake --preset release "${defines[@]}" >/dev/null
fi

# The command line first: `compass plan` works as soon as it is linked.
cmake --build --preset release --target compass_cli -- -j"$(nproc)" |
  { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
if ((tests)); then
  cmake --build --preset release -- -j"$(nproc)" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
fi

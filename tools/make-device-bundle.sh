#!/usr/bin/env bash
# Builds the CUDA-enabled `compass`, `test_cuda`, `test_launch_gpu` and `bench_fused` HERE
# (the development machine, with our Debian packages) and collects them, with the non-system
# shared libraries they need, into a folder that the device machine can run without any of our packages:
#   build-device/bundle/bin/{compass,test_cuda,test_launch_gpu,bench_fused}
#   build-device/bundle/lib/*.so*          fmt, OpenBLAS, gfortran, libstdc++, ... (from ldd)
#   build-device/bundle/glibc/             this machine's loader and libc, used by
#                                          tools/device-check.sh only if the device's glibc is
#                                          older than the one the binaries were linked against
#   build-device/bundle/manifest.txt       what is inside, sizes, required GLIBC version
# Not bundled (they exist on the device, CUDA 13 on both sides): libcuda (driver), cuBLASLt,
# cudart (linked statically anyway) and NCCL (loaded with dlopen only for multi-GPU runs).
# The device tool carries at most 64 MiB: the script fails if the bundle is larger.
#
# Usage: tools/make-device-bundle.sh [build-dir]     (default build-device; archs via
#        COMPASS_CUDA_ARCHS, default 90 = H200; JOBS, default 2). With FROM=<dir> it skips the
#        build and bundles <dir>/compass and <dir>/tests/test_cuda from an existing CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-device}
ARCHS=${COMPASS_CUDA_ARCHS:-90}
JOBS=${JOBS:-2}
BUNDLE="$BUILD/bundle"
LIMIT_BYTES=$((64 * 1024 * 1024))

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ -z "${FROM:-}" ]; then
# The simulator (SimGrid pulls in ns-3, boost and gsl: tens of MB) is not needed on the device.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOMPASS_WITH_CUDA=ON -DCOMPASS_CUDA_ARCHS="$ARCHS" -DCOMPASS_WITH_SIM=OFF -DCOMPASS_FUSED_KERNELS=ON \
  -DCOMPASS_BUILD_BENCH=ON -DCOMPASS_BUILD_FUZZ=OFF -DCOMPASS_BUILD_TESTS=ON \
  -DCOMPASS_FUSED_SM80_ARCHS="$(echo "$ARCHS" | sed 's/\([0-9]\+\)/\1-real/g')" \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$BUILD" --target compass_cli test_cuda test_launch_gpu bench_fused -j"$JOBS"
SRC="$BUILD"
else
  SRC="$FROM"
  mkdir -p "$BUILD"
fi

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/glibc"
cp "$SRC/compass" "$SRC/tests/test_cuda" "$BUNDLE/bin/"
# The fused-kernel benchmark (tools/device-fused-check.sh), when the build has it.
[ -f "$SRC/bench/bench_fused" ] && cp "$SRC/bench/bench_fused" "$BUNDLE/bin/"
# The one-process-per-GPU tests (tools/device-mp-check.sh; COMPASS_CLI names the bundled compass).
[ -f "$SRC/tests/test_launch_gpu" ] && cp "$SRC/tests/test_launch_gpu" "$BUNDLE/bin/"
strip --strip-unneeded "$BUNDLE"/bin/*

# Libraries the device provides itself, or that must come from its own driver install.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libcuda\.so|libcudart|libcublas|libcublasLt|libnccl|libnvidia)'
glibc='^(ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so)'
for bin in "$BUNDLE"/bin/*; do
  ldd "$bin" | awk '/=>/ {print $1, $3} !/=>/ && /\// {print $1, $1}' | while read -r name path; do
    base=$(basename "$name")
    if [[ "$base" =~ $glibc ]]; then
      [ -f "$path" ] && cp -L "$path" "$BUNDLE/glibc/$base"
      continue
    fi
    [[ "$base" =~ $skip ]] && continue
    [ "$path" = "not" ] && { echo "make-device-bundle: $bin needs $name, which is not found" >&2; exit 1; }
    [ -f "$BUNDLE/lib/$base" ] || cp -L "$path" "$BUNDLE/lib/$base"
  done
done
strip --strip-unneeded "$BUNDLE"/lib/*.so* 2>/dev/null || true

{
  echo "compass device bundle, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (working tree may differ)"
  echo "CUDA archs: $ARCHS; nvcc: $(nvcc --version | tail -1)"
  echo "required GLIBC: $(objdump -T "$BUNDLE"/bin/* "$BUNDLE"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  echo "needed from the device: libcuda.so.1 (driver), libcublasLt.so.13"
  echo "files:"
  (cd "$BUNDLE" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$BUNDLE/manifest.txt"

size=$(du -sb "$BUNDLE" | cut -f1)
echo "make-device-bundle: $BUNDLE is $((size / 1024 / 1024)) MiB ($size bytes)"
if [ "$size" -gt "$LIMIT_BYTES" ]; then
  echo "make-device-bundle: larger than the 64 MiB the device tool carries" >&2
  exit 1
fi

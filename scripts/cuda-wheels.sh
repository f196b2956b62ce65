# Sourced by scripts/ci-nvrtc.sh and scripts/gpu-check.sh, from the repository root: installs
# NVIDIA's PyPI wheels for what devcheck loads at run time into a venv in the repository
# (.venv/nvrtc, under .venv/, which git ignores) and exports the variables that make devcheck
# find them. Needs no GPU.
#
#   cuda_wheels_nvrtc   NVRTC (libnvrtc.so.12) and the CUDA headers its kernels include
#                       (cuda_fp16.h): LD_LIBRARY_PATH, DEVCHECK_CUDA_INCLUDE
#   cuda_wheels_cublas  cuBLAS (libcublas.so.12) for matmul, unless the loader finds one already
#                       (a CUDA toolkit): LD_LIBRARY_PATH

cuda_wheels_venv=.venv/nvrtc

cuda_wheels_install() {
    if [[ ! -x "$cuda_wheels_venv/bin/python" ]]; then
        python3 -m venv "$cuda_wheels_venv" || return 1
    fi
    "$cuda_wheels_venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

cuda_wheels_dir() {
    "$cuda_wheels_venv/bin/python" -c 'import nvidia; print(list(nvidia.__path__)[0])'
}

cuda_wheels_nvrtc() {
    cuda_wheels_install nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79 || return 1
    local nvidia lib include
    nvidia="$(cuda_wheels_dir)" || return 1
    lib="$nvidia/cuda_nvrtc/lib"
    include="$nvidia/cuda_runtime/include"
    test -e "$lib/libnvrtc.so.12" || { echo "libnvrtc.so.12 missing in $lib" >&2; return 1; }
    test -e "$include/cuda_fp16.h" || { echo "cuda_fp16.h missing in $include" >&2; return 1; }
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export DEVCHECK_CUDA_INCLUDE="$include"
}

cuda_wheels_cublas() {
    if python3 -c 'import ctypes; ctypes.CDLL("libcublas.so.12")' 2>/dev/null; then
        return 0
    fi
    echo "libcublas.so.12 not found: installing it from PyPI (nvidia-cublas-cu12)"
    cuda_wheels_install nvidia-cublas-cu12==12.9.1.4 || return 1
    local lib
    lib="$(cuda_wheels_dir)/cublas/lib" || return 1
    test -e "$lib/libcublas.so.12" || { echo "libcublas.so.12 missing in $lib" >&2; return 1; }
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# Sourced by scripts/ci-nvrtc.sh and scripts/gpu-check.sh, from the repository root: installs
# NVIDIA's PyPI wheels for what devcheck loads at run time into a venv in the repository
# (.venv/nvrtc, under .venv/, which git ignores) and exports the variables that make devcheck
# find them. Needs no GPU.
#
#   cuda_wheels_nvrtc   NVRTC (libnvrtc.so.12) and the CUDA headers its kernels include
#                       (cuda_fp16.h): LD_LIBRARY_PATH, DEVCHECK_CUDA_INCLUDE
#   cuda_wheels_cublas  cuBLAS (libcublas.so.12) for matmul, unless the loader finds one already
#                       (a CUDA toolkit): LD_LIBRARY_PATH
#   cuda_local_libs DIR NVRTC, cuBLAS and headers the machine already has, installing nothing

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

# For a machine that cannot install anything (scripts/gpu-check.sh --prebuilt): the CUDA
# libraries it already has, from a CUDA toolkit or the NVIDIA wheels its python3's PyTorch came
# with. Links the newest libnvrtc and libcublas found under the first names cudarc tries
# ($1/libnvrtc.so, $1/libcublas.so; a CUDA 13 library is libnvrtc.so.13, which a build for CUDA 12
# does not ask for) and exports LD_LIBRARY_PATH and DEVCHECK_CUDA_INCLUDE. Returns 1 when no NVRTC
# or no cuda_fp16.h is found.
cuda_local_libs() {
    local links="$1" roots=() nvidia nvrtc cublas include dir
    roots+=("${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}")
    nvidia="$(python3 -c 'import nvidia; print(*nvidia.__path__, sep="\n")' 2> /dev/null)" || nvidia=""
    while IFS= read -r dir; do
        [[ -n "$dir" ]] && roots+=("$dir")
    done <<< "$nvidia"
    # The newest version by file name, wherever it lies.
    newest() {
        find "${roots[@]}" -maxdepth 4 -name "$1" 2> /dev/null |
            awk -F/ '{ print $NF "\t" $0 }' | sort -V | tail -1 | cut -f2
    }
    nvrtc="$(newest 'libnvrtc.so.[0-9]*')"
    [[ -n "$nvrtc" ]] || { echo "no libnvrtc.so.N under ${roots[*]}" >&2; return 1; }
    # The headers that go with that NVRTC first: <root>/lib64 -> <root>/include, nvidia/cu13/lib ->
    # nvidia/cu13/include.
    include="$(dirname "$(dirname "$nvrtc")")/include"
    if [[ ! -e "$include/cuda_fp16.h" ]]; then
        include="$(find "${roots[@]}" -maxdepth 4 -name cuda_fp16.h 2> /dev/null | head -1)"
        include="${include%/cuda_fp16.h}"
    fi
    [[ -n "$include" ]] || { echo "no cuda_fp16.h under ${roots[*]}" >&2; return 1; }
    mkdir -p "$links"
    ln -sfn "$nvrtc" "$links/libnvrtc.so"
    LD_LIBRARY_PATH="$links:$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    cublas="$(newest 'libcublas.so.[0-9]*')"
    if [[ -n "$cublas" ]]; then
        ln -sfn "$cublas" "$links/libcublas.so"
        # libcublasLt lies beside it.
        LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cublas")"
    else
        echo "no libcublas.so.N under ${roots[*]}: matmul on the GPU will fail" >&2
    fi
    export LD_LIBRARY_PATH
    export DEVCHECK_CUDA_INCLUDE="$include"
    echo "NVRTC: $nvrtc"
    echo "cuBLAS: ${cublas:-none}"
    echo "headers: $include"
}

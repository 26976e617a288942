#!/usr/bin/env bash
# The parallel-decoding check on a bare GPU host (docs: scripts/make-gpu-kit.sh makes its kit).
#
# The host has no network and no llama-cpp-python or gguf: it gets this repository and
# the kit (gpu-kit/: the trimmed llama-cpp-python sdist and a few wheels). In one time
# box (GPU_CHECK_BUDGET_S, default 570 s, inside a device run's 600 s) it
#   1. builds llama.cpp once from the sdist's vendored tree, for Hopper only (sm_90),
#      with shared libraries: llama-server and the libraries llama-cpp-python loads
#      (LLAMA_CPP_LIB_PATH / MTMD_CPP_LIB point its Python package at them, so the CUDA
#      kernels are compiled once, not once for pip and again for the server);
#   2. installs the kit's wheels (gguf, and llama-cpp-python's own imports) into a
#      scratch site folder;
#   3. builds the Gemma-3-4B-shaped random model at Q4_K_M (appliance's shape builder,
#      llama.cpp's quantizer);
#   4. runs the parallel bench at N = 1, 4, 8, 16 with every layer on the GPU: the
#      engine, the raw batched-decode loop and llama-server side by side, with peak
#      VRAM against appliance.gpu's plan.
# Everything lands in $OUT (at most 8 files come back from a device run):
#   gpu-check.log (steps, times, versions, model build), build.log, bench.log (the
#   table), parallel-bench.json, server-logs.tar.gz.
#
# Rehearsal without CUDA: --cpu (or GPU_CHECK_CPU=1) builds a CPU tree (or reuses
# GPU_CHECK_BUILD), runs the small gemma3-mini shape at N = 1, 2 with no offload.
#
# Knobs (environment): GPU_KIT, OUT, GPU_CHECK_WORK, GPU_CHECK_BUILD, PYTHON, JOBS,
# GPU_CHECK_BUDGET_S, GPU_CHECK_PARALLEL, GPU_CHECK_SHAPE, GPU_CHECK_TOKENS,
# GPU_CHECK_THREADS, GPU_CHECK_N_CTX.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CPU="${GPU_CHECK_CPU:-0}"
[ "${1:-}" = "--cpu" ] && CPU=1
if [ -n "${GPU_KIT:-}" ]; then KIT="$GPU_KIT"
elif [ -d "$ROOT/gpu-kit" ]; then KIT="$ROOT/gpu-kit"
else KIT="$ROOT/shared/gpu-kit"; fi
OUT="${OUT:-$ROOT/gpu-check-out}"
WORK="${GPU_CHECK_WORK:-/tmp/gpu-check}"
BUILD="${GPU_CHECK_BUILD:-$WORK/build}"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"
BUDGET_S="${GPU_CHECK_BUDGET_S:-570}"
if [ "$CPU" = 1 ]; then
    PARALLEL="${GPU_CHECK_PARALLEL:-1,2}"; SHAPE="${GPU_CHECK_SHAPE:-gemma3-mini}"
    TOKENS="${GPU_CHECK_TOKENS:-16}"; THREADS="${GPU_CHECK_THREADS:-1}"; NGL=0
else
    PARALLEL="${GPU_CHECK_PARALLEL:-1,4,8,16}"; SHAPE="${GPU_CHECK_SHAPE:-gemma3-4b}"
    TOKENS="${GPU_CHECK_TOKENS:-128}"; THREADS="${GPU_CHECK_THREADS:-4}"; NGL=-1
fi
N_CTX="${GPU_CHECK_N_CTX:-4096}"
RESERVE_S=15  # kept back for packing the results
SITE="$WORK/site"
LOG="$OUT/gpu-check.log"
STARTED=$SECONDS
FAILED=0

mkdir -p "$OUT" "$WORK"
: >"$LOG"
note() { echo "[$(( SECONDS - STARTED ))s] $*" | tee -a "$LOG"; }

# step NAME CAP_S LOGFILE CMD...: runs CMD in what is left of the budget (at most CAP_S),
# appending its output to LOGFILE; records its time and exit status.
step() {
    local name="$1" cap="$2" out="$3"; shift 3
    local left=$(( BUDGET_S - (SECONDS - STARTED) - RESERVE_S ))
    local limit=$(( cap < left ? cap : left ))
    if [ "$limit" -lt 10 ]; then
        note "step=$name skipped: the time box is spent"; FAILED=1; return 1
    fi
    note "step=$name start limit_s=$limit"
    local begin=$SECONDS rc=0
    timeout --kill-after=10 "$limit" "$@" >>"$out" 2>&1 || rc=$?
    note "step=$name rc=$rc seconds=$(( SECONDS - begin ))$([ $rc = 124 ] && echo ' (timed out)')"
    [ $rc = 0 ] || FAILED=1
    return $rc
}

finish() {
    if [ -d "$WORK/server-logs" ]; then
        tar -czf "$OUT/server-logs.tar.gz" -C "$WORK" server-logs
    fi
    note "done failed=$FAILED total_s=$(( SECONDS - STARTED ))"
    exit $FAILED
}

note "gpu-check mode=$([ "$CPU" = 1 ] && echo cpu || echo gpu) root=$ROOT kit=$KIT work=$WORK"
{
    uname -a; echo "cpus $(nproc)"; free -g | head -2
    [ "$CPU" = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    [ "$CPU" = 1 ] || nvcc --version | tail -2
    cmake --version | head -1; ninja --version; "$PYTHON" --version
} >>"$LOG" 2>&1

SDIST="$(ls "$KIT"/llama_cpp_python-*.tar.gz 2>/dev/null | head -n 1)"
if [ -z "$SDIST" ]; then note "no llama_cpp_python sdist in $KIT (run scripts/make-gpu-kit.sh)"; exit 2; fi
SRC="$WORK/$(basename "$SDIST" .tar.gz)"
if [ ! -d "$SRC" ]; then
    step unpack 120 "$LOG" tar -xzf "$SDIST" -C "$WORK" || finish
fi

if [ -x "$BUILD/bin/llama-server" ] && [ -e "$BUILD/bin/libllama.so" ]; then
    note "build reused: $BUILD"
else
    CMAKE_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
                 -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
                 -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF)
    [ "$CPU" = 1 ] || CMAKE_FLAGS+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF)
    step configure 120 "$OUT/build.log" cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" "${CMAKE_FLAGS[@]}" \
        || finish
    step build 420 "$OUT/build.log" cmake --build "$BUILD" -j "$JOBS" --target llama-server || finish
fi

step site 60 "$LOG" "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile \
    --disable-pip-version-check --target "$SITE" "$KIT"/*.whl || finish
export PYTHONPATH="$SITE:$SRC:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export LLAMA_CPP_LIB_PATH="$BUILD/bin" MTMD_CPP_LIB="$BUILD/bin" PYTHONUNBUFFERED=1

# The libraries must be the ones just built, and on a GPU host they must offload.
step smoke 60 "$LOG" "$PYTHON" -c "
import sys, gguf, llama_cpp, numpy, PIL
from importlib.metadata import version
print('llama_cpp', llama_cpp.__version__, llama_cpp.__file__, llama_cpp.llama_cpp._lib._name)
print('gguf', version('gguf'), 'numpy', numpy.__version__, 'pillow', PIL.__version__)
offload = llama_cpp.llama_supports_gpu_offload()
print('gpu offload', offload)
sys.exit(0 if offload or $CPU else 1)
" || finish

step model 240 "$LOG" "$PYTHON" -c "
from pathlib import Path
from appliance.engines.llama.parallel_bench import shaped_model
print(*shaped_model('$SHAPE', Path('$WORK/models')))
" || finish

step bench 420 "$OUT/bench.log" "$PYTHON" -m appliance.engines.llama.parallel_bench \
    --shape "$SHAPE" --cache-dir "$WORK/models" --parallel "$PARALLEL" --tokens "$TOKENS" \
    --threads "$THREADS" --n-ctx "$N_CTX" --n-gpu-layers "$NGL" \
    --against-llama-server "$BUILD/bin/llama-server" --server-logs "$WORK/server-logs" \
    --json "$OUT/parallel-bench.json"
grep -v "^WARNING" "$OUT/bench.log" | tail -n 20 >>"$LOG"
finish

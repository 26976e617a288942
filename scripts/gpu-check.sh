#!/usr/bin/env bash
# The vision engine on a bare GPU host, through the daemon's own paths (scripts/make-gpu-kit.sh
# makes its kit; README, "GPU hosts", has what it found).
#
# The host has no network and none of the appliance's packages but numpy, Pillow, OpenCV,
# psutil, NVML's bindings, onnxruntime and pytest: it gets this repository and the kit
# (gpu-kit/: llama.cpp prebuilt for Hopper or the trimmed llama-cpp-python sdist, and the
# wheels of what the daemon's worker, `appliance ocr` and the tests import; no web stack).
# In one time box (GPU_CHECK_BUDGET_S, default 560 s, inside a device run's 600 s) it
#   1. unpacks the prebuilt llama.cpp (libraries and llama-server), or builds it from the
#      sdist's vendored tree for sm_90 with the Makefile's CPU flags; llama-cpp-python's
#      package loads those libraries (LLAMA_CPP_LIB_PATH, MTMD_CPP_LIB);
#   2. installs the kit's wheels into a scratch site folder;
#   3. builds the Gemma-3-4B-shaped random model at Q4_K_M (appliance's shape builder);
#   4. runs the parallel bench at N = 1, 4, 8, 16, 32, every layer on the GPU: the engine
#      in the daemon's worker (its entry point, imports and settings) against the raw
#      batched-decode loop and llama-server with as many slots, peak VRAM against
#      appliance.memory_plan's plan; a JSON line per N as soon as it is measured;
#   5. reads one page with `appliance ocr` and the llama engine;
#   6. runs `appliance doctor`, whose load check starts a worker as well;
#   7. runs tests/service/test_gpu_host.py: the memory watermarks through the real NVML
#      (a load that would not fit is refused, pages above the high watermark are held);
#   8. probes which of OpenCV's bundled libraries makes llama.cpp's CUDA load crash
#      (scripts/opencv_clash.py).
# What it writes lands in $OUT (a device run brings back at most 8 files):
#   gpu-check.log (steps, times, versions, ocr, doctor, watermarks, probe), build.log,
#   bench.log (the table), bench-runs.jsonl, parallel-bench.json, watermarks.log,
#   probe.jsonl, server-logs.tar.gz.
#
# Rehearsal without CUDA: --cpu (or GPU_CHECK_CPU=1) builds a CPU tree (or reuses
# GPU_CHECK_BUILD) and runs the small gemma3-mini shape at N = 1, 2 with no offload; the
# watermark tests and the probe skip themselves without a card.
#
# Knobs (environment): GPU_KIT, OUT, GPU_CHECK_WORK, GPU_CHECK_BUILD, PYTHON, JOBS,
# GPU_CHECK_BUDGET_S, GPU_CHECK_PARALLEL, GPU_CHECK_SHAPE, GPU_CHECK_TOKENS,
# GPU_CHECK_THREADS, GPU_CHECK_N_CTX, and GPU_CHECK_ONLY: the steps 4 to 8 to run (ocr,
# doctor, bench, watermarks, probe; default all), for a second run on a host that is
# still warm (its build and model in GPU_CHECK_WORK are reused).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CPU="${GPU_CHECK_CPU:-0}"
[ "${1:-}" = "--cpu" ] && CPU=1
KIT="${GPU_KIT:-$ROOT/gpu-kit}"
OUT="${OUT:-$ROOT/gpu-check-out}"
WORK="${GPU_CHECK_WORK:-/tmp/gpu-check}"
BUILD="${GPU_CHECK_BUILD:-$WORK/build}"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"
BUDGET_S="${GPU_CHECK_BUDGET_S:-560}"
if [ "$CPU" = 1 ]; then
    PARALLEL="${GPU_CHECK_PARALLEL:-1,2}"; SHAPE="${GPU_CHECK_SHAPE:-gemma3-mini}"
    TOKENS="${GPU_CHECK_TOKENS:-16}"; THREADS="${GPU_CHECK_THREADS:-1}"; NGL=0
else
    PARALLEL="${GPU_CHECK_PARALLEL:-1,4,8,16,32}"; SHAPE="${GPU_CHECK_SHAPE:-gemma3-4b}"
    TOKENS="${GPU_CHECK_TOKENS:-128}"; THREADS="${GPU_CHECK_THREADS:-4}"; NGL=-1
fi
N_CTX="${GPU_CHECK_N_CTX:-4096}"
ONLY="${GPU_CHECK_ONLY:-ocr,doctor,bench,watermarks,probe}"
RESERVE_S=10  # kept back for packing the results
SITE="$WORK/site"
LOG="$OUT/gpu-check.log"
STARTED=$SECONDS
FAILED=0

mkdir -p "$OUT" "$WORK"
: >"$LOG"
note() { echo "[$(( SECONDS - STARTED ))s] $*" | tee -a "$LOG"; }

wanted() { [[ ",$ONLY," == *",$1,"* ]]; }

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

# 1. llama.cpp: the kit's prebuilt tree, else a build from the sdist
PREBUILT="$KIT/llama-prebuilt.tar.xz"
if [ -x "$BUILD/bin/llama-server" ] && [ -e "$BUILD/bin/libllama.so" ]; then
    note "build reused: $BUILD"
elif [ "$CPU" = 0 ] && [ -f "$PREBUILT" ]; then
    mkdir -p "$BUILD"
    step unpack 120 "$LOG" tar -xJf "$PREBUILT" -C "$BUILD" || finish
else
    SDIST="$(ls "$KIT"/llama_cpp_python-*.tar.gz 2>/dev/null | head -n 1)"
    if [ -z "$SDIST" ]; then note "no prebuilt llama.cpp nor sdist in $KIT (run scripts/make-gpu-kit.sh)"; exit 2; fi
    SRC="$WORK/$(basename "$SDIST" .tar.gz)"
    if [ ! -d "$SRC" ]; then
        step unpack 120 "$LOG" tar -xzf "$SDIST" -C "$WORK" || finish
    fi
    # the Makefile's CPU flags (AVX2, not this CPU exactly: a native build segfaulted on an
    # AMX Xeon), shared libraries, llama-server
    read -r -a CPU_FLAGS <<<"$(make -s --no-print-directory -C "$ROOT" llama-cmake-args)"
    CMAKE_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON "${CPU_FLAGS[@]}"
                 -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
                 -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF)
    [ "$CPU" = 1 ] || CMAKE_FLAGS+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_NCCL=OFF)
    step configure 120 "$OUT/build.log" cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" "${CMAKE_FLAGS[@]}" \
        || finish
    step build 420 "$OUT/build.log" cmake --build "$BUILD" -j "$JOBS" --target llama-server || finish
    mkdir -p "$BUILD/python" && cp -r "$SRC/llama_cpp" "$BUILD/python/"
fi

# 2. the kit's wheels, in a site folder of their own alone
rm -rf "$SITE"
step site 60 "$LOG" "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile \
    --disable-pip-version-check --target "$SITE" "$KIT"/*.whl || finish
export PYTHONPATH="$BUILD/python:$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export LLAMA_CPP_LIB_PATH="$BUILD/bin" MTMD_CPP_LIB="$BUILD/bin" PYTHONUNBUFFERED=1
# a crash's backtrace through gdb, where gdb is installed, would outlive the crash; Python's
# own (every process, the engine worker too) names the call that crashed
export GGML_NO_BACKTRACE=1 PYTHONFAULTHANDLER=1

# The libraries must be the ones just unpacked or built, and on a GPU host they must offload.
step smoke 60 "$LOG" "$PYTHON" -c "
import sys, appliance, llama_cpp, gguf, numpy, PIL, cv2
from importlib.metadata import version
print('llama_cpp', llama_cpp.__version__, llama_cpp.__file__, llama_cpp.llama_cpp._lib._name)
print('system', llama_cpp.llama_print_system_info().decode())
print('gguf', version('gguf'), 'numpy', numpy.__version__, 'pillow', PIL.__version__,
      'opencv', cv2.__version__)
loaded = list(sys.modules)
print('llama_cpp before cv2', loaded.index('llama_cpp') < loaded.index('cv2'))
offload = llama_cpp.llama_supports_gpu_offload()
print('gpu offload', offload)
sys.exit(0 if offload or $CPU else 1)
" || finish

# 3. the model
step model 240 "$LOG" "$PYTHON" -c "
from pathlib import Path
from appliance.engines.llama.parallel_bench import shaped_model
print(*shaped_model('$SHAPE', Path('$WORK/models')))
" || finish
MODEL="$(ls "$WORK"/models/"$SHAPE"-*/"$SHAPE"-*.gguf | head -n 1)"
MMPROJ="$(ls "$WORK"/models/"$SHAPE"-*/mmproj-*.gguf | head -n 1)"
CONFIG="$WORK/gpu.toml"
cat >"$CONFIG" <<EOF
[paths]
data_dir = "$WORK/var/data"
output_dir = "$WORK/var/output"
[engine]
name = "llama"
model = "$MODEL"
mmproj = "$MMPROJ"
threads = $THREADS
n_ctx = $N_CTX
n_gpu_layers = $NGL
[output]
formats = ["md", "json", "txt"]
EOF

# 4. the parallel bench, a JSON line per N
wanted bench && step bench 300 "$OUT/bench.log" "$PYTHON" -m appliance.engines.llama.parallel_bench \
    --config "$CONFIG" --model "$MODEL" --mmproj "$MMPROJ" --parallel "$PARALLEL" \
    --tokens "$TOKENS" --against-llama-server "$BUILD/bin/llama-server" \
    --server-logs "$WORK/server-logs" --jsonl "$OUT/bench-runs.jsonl" \
    --json "$OUT/parallel-bench.json"
[ -f "$OUT/bench.log" ] && grep -v "^WARNING" "$OUT/bench.log" | tail -n 16 >>"$LOG"

# 5. one page through `appliance ocr` (exit 3: read, and a person would be asked to look)
"$PYTHON" -c "
from appliance.raster.synthetic import render_text_page, sample_lines
render_text_page(sample_lines(seed=7, count=24), font_size=30).save('$WORK/page.png')"
wanted ocr && step ocr 120 "$LOG" bash -c '"$0" -m appliance.cli ocr --config "$1" "$2" -o "$3"; rc=$?
    head -c 300 "$3"; echo; [ $rc = 0 ] || [ $rc = 3 ]' "$PYTHON" "$CONFIG" "$WORK/page.png" \
    "$WORK/page.md"

# 6. the doctor, with its load check in a worker
wanted doctor && step doctor 120 "$LOG" "$PYTHON" -m appliance.cli doctor --config "$CONFIG"

# 7. the watermarks through the real NVML
wanted watermarks && step watermarks 120 "$OUT/watermarks.log" env APPLIANCE_GPU_MODEL="$MODEL" \
    APPLIANCE_GPU_MMPROJ="$MMPROJ" "$PYTHON" -m pytest -q -p no:cacheprovider -rs \
    "$ROOT/tests/service/test_gpu_host.py"
[ -f "$OUT/watermarks.log" ] && tail -n 3 "$OUT/watermarks.log" >>"$LOG"

# 8. which library of OpenCV's wheel clashes with llama.cpp's CUDA load
wanted probe && step probe 90 "$LOG" "$PYTHON" "$ROOT/scripts/opencv_clash.py" --cache-dir "$WORK/models" \
    --jsonl "$OUT/probe.jsonl" $([ "$CPU" = 1 ] && echo --cpu)
finish

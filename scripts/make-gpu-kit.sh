#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU host that has no network and no
# llama-cpp-python or gguf: a trimmed llama-cpp-python sdist (its vendored llama.cpp
# builds both the libraries the Python package loads and llama-server) and the wheels
# of gguf and of what those two packages import. Runs on a machine with network
# access and the project's .venv; the kit must stay well under the 64 MiB that a device
# run can carry.
#
# Usage: scripts/make-gpu-kit.sh [SDIST.tar.gz] [OUT_DIR]   (OUT_DIR defaults to gpu-kit/)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SDIST="${1:-/tmp/sdist/llama_cpp_python-0.3.36.tar.gz}"
OUT="${2:-$ROOT/gpu-kit}"
PYTHON="${PYTHON:-/work/main/.venv/bin/python}"

[ -f "$SDIST" ] || { echo "no sdist at $SDIST" >&2; exit 2; }
NAME="$(basename "$SDIST" .tar.gz)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

tar -xzf "$SDIST" -C "$WORK"
TREE="$WORK/$NAME"
LCPP="$TREE/vendor/llama.cpp"
[ -d "$LCPP/tools/server" ] && [ -d "$LCPP/tools/mtmd" ] || { echo "unexpected sdist layout" >&2; exit 2; }

# Test vocabularies, docs, tests, benchmarks and git history: nothing a build reads.
rm -rf "$TREE/.git" "$LCPP/.git" "$LCPP/models" "$LCPP/docs" "$LCPP/tests" "$LCPP/benches" "$LCPP/media"
# tools/ui is the server's web UI. The server's CMake still adds the directory and
# generates an empty asset table from these three files when no UI assets exist, so
# keep them and drop the Svelte sources (8.5 MB). gpu-check.sh configures the server
# with -DLLAMA_USE_PREBUILT_UI=OFF so nothing tries to download the prebuilt UI.
find "$LCPP/tools/ui" -mindepth 1 -maxdepth 1 \
    ! -name CMakeLists.txt ! -name ui.cpp.in ! -name ui.h.in -exec rm -rf {} +

mkdir -p "$OUT"
rm -f "$OUT/$NAME.tar.gz" "$OUT"/*.whl
tar -czf "$OUT/$NAME.tar.gz" -C "$WORK" "$NAME"

# gguf, and what `import llama_cpp` and `import gguf` import (llama-cpp-python's chat
# templates and cache: jinja2, MarkupSafe, diskcache, typing_extensions; gguf: PyYAML),
# at the versions tested here, as wheels for the host's CPython 3.12. The GPU image has
# most of them but not diskcache; carrying all keeps the check independent of its image.
WHEELS=(gguf pyyaml diskcache jinja2 markupsafe typing_extensions)
PINS=()
for name in "${WHEELS[@]}"; do
    PINS+=("$name==$("$PYTHON" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")")
done
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$OUT" "${PINS[@]}"

ls -l "$OUT"
TOTAL="$(du -sb "$OUT" | cut -f1)"
echo "kit=$OUT bytes=$TOTAL"
# A device run carries 64 MiB in all, the repository included: keep a wide margin.
[ "$TOTAL" -lt $((32 * 1024 * 1024)) ] || { echo "kit is too big for a device run" >&2; exit 1; }

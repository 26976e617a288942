# Two entry points do all set-up on a fresh machine:
#   make run   - create .venv on first use, install Tesseract if missing (the classic
#                engine's second reader for pages in doubt), then serve the appliance
#   make test  - the same set-up, Chromium if missing (the browser tests drive it
#                through Playwright) and systemd's tools (the unit file tests run
#                systemd-analyze), then run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test tesseract chromium systemd cjk-fonts clean

# llama.cpp for any x86-64 CPU with AVX2 rather than for this CPU exactly: a native
# build on a Xeon with AMX and AVX-512 segfaults on quantized models (seen with
# 0.3.36 on Sapphire Rapids). A CMAKE_ARGS of your own (CUDA) replaces this.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# llama-cpp-python compiles from source (about 5 minutes on first use).
	CMAKE_ARGS="$${CMAKE_ARGS:-$(LLAMA_CMAKE_ARGS)}" $(BIN)/pip install -e '.[test]'
	touch $(STAMP)

run: $(STAMP) tesseract
	$(BIN)/appliance serve $(if $(CONFIG),--config $(CONFIG))

# Debian's Tesseract 5 with English; other languages are tesseract-ocr-<lang>.
tesseract:
	command -v tesseract >/dev/null || (apt-get update && apt-get install -y --no-install-recommends tesseract-ocr)

# Debian's Chromium for tests/ui/test_browser.py; Playwright's own browser download is not used.
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)

# Debian's systemd for tests/service/test_systemd.py: systemd-analyze verify, sysusers, tmpfiles.
# Only the tools are used; nothing runs as PID 1.
systemd:
	command -v systemd-analyze >/dev/null || (apt-get update && apt-get install -y --no-install-recommends systemd)

# Debian's Noto CJK fonts for the CJK page of make-eval-set's born-digital set (and its tests).
cjk-fonts:
	test -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc || (apt-get update && apt-get install -y --no-install-recommends fonts-noto-cjk)

test: $(STAMP) tesseract chromium systemd cjk-fonts
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)

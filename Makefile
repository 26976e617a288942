# Two entry points do all set-up on a fresh machine:
#   make run   - create .venv on first use, install Tesseract if missing (the classic
#                engine's second reader for pages in doubt) and the Noto CJK fonts
#                (the Chinese pages of `appliance make-eval-set`), then serve the appliance
#   make test  - the same set-up, Chromium if missing (the browser tests drive it
#                through Playwright) and systemd's tools (the unit file tests run
#                systemd-analyze), then run the test suite
# Both install exactly the versions in requirements.lock (every file checked against its
# hash); `make lock` resolves pyproject.toml's dependencies again and writes it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
PIP_VERSION := 26.3
UV_VERSION := 0.13.9
LOCK_VENV := .venv-lock

.PHONY: run test lock tesseract fonts chromium systemd poppler clean llama-cmake-args

# llama.cpp for any x86-64 CPU with AVX2 rather than for this CPU exactly: a native
# build on a Xeon with AMX and AVX-512 segfaults on quantized models (seen with
# 0.3.36 on Sapphire Rapids). A CMAKE_ARGS of your own (CUDA) replaces this.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

$(STAMP): pyproject.toml $(LOCK)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install pip==$(PIP_VERSION)
	# The locked set and nothing else (--no-deps: the lock holds every dependency).
	# llama-cpp-python compiles from source (about 5 minutes on first use).
	CMAKE_ARGS="$${CMAKE_ARGS:-$(LLAMA_CMAKE_ARGS)}" $(BIN)/pip install --require-hashes \
		--no-deps -r $(LOCK)
	$(BIN)/pip install --no-deps -e .
	# every requirement met but one: rapid-table's opencv-python, whose cv2 the
	# headless build provides (pyproject.toml)
	! $(BIN)/pip check | grep -v -e '^No broken requirements found.$$' \
		-e '^rapid-table 0.3.0 requires opencv-python, which is not installed.$$'
	touch $(STAMP)

# Resolve the dependencies of pyproject.toml (with the test extras) again, for every
# platform, with the hash of every file; then run `make test` on what it wrote.
lock:
	test -d $(LOCK_VENV) || $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install uv==$(UV_VERSION)
	$(LOCK_VENV)/bin/uv pip compile pyproject.toml --extra test --generate-hashes \
		--universal --python-version 3.11 --no-emit-package opencv-python $(LOCK_ARGS) -o $(LOCK)

run: $(STAMP) tesseract fonts
	$(BIN)/appliance serve $(if $(CONFIG),--config $(CONFIG))

# Debian's Tesseract 5 with English and simplified Chinese (the second opinion's
# default languages); other languages are tesseract-ocr-<lang>.
tesseract:
	tesseract --list-langs 2>/dev/null | grep -qx chi_sim || (apt-get update && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-chi-sim)

# Debian's Noto CJK fonts: Chinese, Japanese and Korean pages for `appliance make-eval-set`.
fonts:
	test -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc || (apt-get update && apt-get install -y --no-install-recommends fonts-noto-cjk)

# Debian's Chromium for tests/ui/test_browser.py; Playwright's own browser download is not used.
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)

# Debian's systemd for tests/service/test_systemd.py: systemd-analyze verify, sysusers, tmpfiles.
# Only the tools are used; nothing runs as PID 1.
systemd:
	command -v systemd-analyze >/dev/null || (apt-get update && apt-get install -y --no-install-recommends systemd)

# Debian's poppler-utils: pdftotext reads the searchable PDFs back in tests (the text
# layer an archive such as paperless-ngx indexes).
poppler:
	command -v pdftotext >/dev/null || (apt-get update && apt-get install -y --no-install-recommends poppler-utils)

test: $(STAMP) tesseract fonts chromium systemd poppler
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)

# The same CPU flags for scripts/gpu-check.sh's CUDA build on a GPU host.
llama-cmake-args:
	@echo $(LLAMA_CMAKE_ARGS)

# Everything sets itself up from nothing: a virtual environment in .venv, the
# dependencies, and the release build of the Rust extension.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXT_SOURCES := $(shell find rust -name '*.rs' -o -name Cargo.toml) Cargo.toml Cargo.lock pyproject.toml

.PHONY: all setup build dist test test-rust lint typecheck test-python browser go-interop demo bench reliability clean

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Dependencies come from pyproject.toml; the extension is built optimised (release).
$(STAMP): $(PY) $(EXT_SOURCES)
	@echo "installing the dependencies, then building the Rust extension (release, ~2 min on 2 cores)..."
	$(PY) -m pip install --progress-bar on -e '.[dev,fleet]'
	touch $(STAMP)

setup: $(STAMP)

build: setup

# What a reviewer installs without a Rust toolchain: one abi3 wheel (CPython >= 3.11, a
# manylinux tag maturin checks for this machine) and the sdist, in dist/.
dist: setup
	rm -rf dist
	$(BIN)/maturin build --release --out dist
	$(BIN)/maturin sdist --out dist

test: setup test-rust lint typecheck test-python

test-rust:
	cargo test --workspace --exclude agentledger-python --release --quiet
	# Second pass: the portable paths forced (rust/core/src/portable.rs), so each fast
	# path's reference runs on every machine: the hash lanes, hex readers, lean and clean rows.
	AGENTLEDGER_PORTABLE=1 cargo test -p agentledger-core --release --quiet -- hash:: journal log::
	AGENTLEDGER_PORTABLE=1 cargo test -p agentledger-bernstein --release --quiet
	cargo clippy --workspace --all-targets --release --quiet -- -D warnings
	cargo fmt --all -- --check

# lint-imports: the import contracts in pyproject.toml (no cycles; the layers of
# docs/ARCHITECTURE.md).
lint: setup
	$(BIN)/ruff check python tests benches
	$(BIN)/ruff format --check python tests benches
	$(BIN)/lint-imports --no-cache

# mypy, then the extension's stub checked against the built extension (stubtest).
typecheck: setup
	$(BIN)/mypy
	$(PY) -m mypy.stubtest agentledger._core --allowlist tests/stubtest-allowlist.txt

# The HTML report is tested in a real browser: Debian's chromium, driven by playwright
# (never a downloaded browser). When it is missing and we run as root, it is installed
# with apt (saying so first); otherwise the target says how, and stops.
browser:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "the browser test needs Debian's chromium: installing it with apt-get (system packages, as root)..."; \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	  else \
	    echo "the browser test needs Debian's chromium (/usr/bin/chromium): run 'sudo apt-get install chromium', then make test again" >&2; \
	    exit 1; \
	  fi; }

# The workspace log is checked by Go's golang.org/x/mod/sumdb/tlog and sumdb/note
# (tests/interop/): Debian's Go and its packaged x/mod, built offline. Installed here when
# missing (CI runs as root on Debian).
go-interop:
	@test -x /usr/bin/go -a -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog || { \
	  echo "the interop test needs Debian's golang-go and golang-golang-x-mod-dev: installing them with apt-get (system packages, as root)..."; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y golang-go golang-golang-x-mod-dev; }

test-python: setup browser go-interop
	$(BIN)/pytest -q

# The demo's signing key lives in .demo/home (removed with .demo), unless AGENTLEDGER_HOME
# names another key folder; its verify notes (for `runs`) go to the usual cache.
DEMO_HOME := $(or $(AGENTLEDGER_HOME),.demo/home)

demo: setup
	rm -rf .demo
	@echo "keys of the demo: $(DEMO_HOME) (set AGENTLEDGER_HOME to choose another folder)"
	AGENTLEDGER_HOME=$(DEMO_HOME) $(BIN)/agentledger --ledger .demo/ledger.db demo --runs 3000

bench: setup
	$(PY) benches/ed25519_batch.py
	$(PY) benches/receipts_verify.py --runs 2000

reliability: setup
	$(BIN)/pytest -q -m slow

clean:
	rm -rf $(VENV) target dist .demo .pytest_cache .mypy_cache .ruff_cache .hypothesis

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
	$(PY) -m pip install --quiet -e '.[dev,fleet]'
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
# (never a downloaded browser). Installed here when missing (CI runs as root on Debian).
browser:
	@test -x /usr/bin/chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

# The workspace log is checked by Go's golang.org/x/mod/sumdb/tlog and sumdb/note
# (tests/interop/): Debian's Go and its packaged x/mod, built offline. Installed here when
# missing (CI runs as root on Debian).
go-interop:
	@test -x /usr/bin/go -a -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog || { \
	  echo "installing Debian's golang-go and golang-golang-x-mod-dev for tests/interop"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y golang-go golang-golang-x-mod-dev; }

test-python: setup browser go-interop
	$(BIN)/pytest -q

demo: setup
	rm -rf .demo
	$(BIN)/agentledger --ledger .demo/ledger.db demo --runs 3000

bench: setup
	$(PY) benches/ed25519_batch.py
	$(PY) benches/receipts_verify.py --runs 2000

reliability: setup
	$(BIN)/pytest -q -m slow

clean:
	rm -rf $(VENV) target dist .demo .pytest_cache .mypy_cache .ruff_cache .hypothesis

# corestack: `make demo` shows Linux vs corestack echo latency; `make test` runs every check.
# Both need root (network namespaces, XDP); scripts/setup.sh installs what is missing.

CARGO ?= cargo
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)

.PHONY: setup build demo test fmt clippy fuzz

setup:
	bash scripts/setup.sh

build: setup
	$(CARGO) build --release

demo: build
	$(TARGET_DIR)/release/corestack demo

fmt:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Every fuzz target over its stored corpus, then a short bounded run of each.
fuzz:
	bash scripts/setup.sh --fuzz
	bash scripts/fuzz.sh regress
	bash scripts/fuzz.sh run $(or $(FUZZ_SECS),10)

# Each test binary runs under a 15-minute watchdog (the slowest, the shim's, takes about 5 on
# 2 cores): a test that hangs fails the run, naming its binary, instead of stalling CI.
TEST_WATCHDOG := --config "target.'cfg(all())'.runner = ['timeout', '--kill-after=10', '900']"

test: setup fmt clippy
	$(CARGO) test --workspace --release $(TEST_WATCHDOG)
	$(MAKE) fuzz

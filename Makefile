# kernelgen: `make generate` regenerates generated/ from specs/; `make test` runs everything CI runs by default.
# Everything the build needs is installed here (Rust and g++ come with the machine).

CARGO     ?= cargo
# One target directory for every cargo call here (the example crates' too), whatever a user's
# cargo configuration says, so that the binaries below are the ones just built.
export CARGO_TARGET_DIR ?= $(CURDIR)/target
# `cargo run --quiet` would hide the first build (minutes on a fresh clone): `generate`
# and `check` depend on `cli`, which builds it with cargo's progress (one `Finished`
# line when it is up to date), and then run it quietly.
KERNELGEN  = $(CARGO) run --quiet --package kernelgen-cli --
# The binary the test lanes run: the one `cargo test --workspace` builds (target `test-build`),
# with the workspace's features, the catalog among them. The CLI alone (`cli`) builds
# without the catalog, so that a broken generated/ can always be regenerated; building it
# as well in the test lanes would compile the emulator, the references and the CLI twice.
TESTED_KERNELGEN = $(CARGO_TARGET_DIR)/debug/kernelgen

# This workspace's crates the dev profile optimizes (.cargo/config.toml, the one list).
OPTIMIZED_CRATES = $(shell sed -n 's/^\[profile\.dev\.package\.\(kernelgen-[a-z-]*\)\]$$/\1/p' .cargo/config.toml)

.PHONY: generate check test test-build test-slow test-sanitize fuzz bench deps cli package check-cuda

## Build the `kernelgen` command (target/debug/kernelgen), showing cargo's progress.
cli:
	@$(CARGO) build --package kernelgen-cli

## Regenerate generated/ (MSL, launcher Rust, manifest) from specs/ and templates/.
generate: cli
	$(KERNELGEN) generate

## Exit 1, listing every stale, missing or orphaned file, if generated/ is not fresh.
check: cli
	$(KERNELGEN) check

## What the build and tests need beyond Rust: g++ (the emulator compiles Metal as C++),
## clang 14 or newer (the Metal check every emulator load and `kernelgen lint` run; Debian's
## clang unless one is on PATH or $KERNELGEN_MSL_CLANG names one),
## numpy and pytest (independent references for `kernelgen run` and `kernelgen emu`),
## MLX's Metal kernel headers from the mlx-metal wheel under target/mlx-metal
## (the emulator's and the Metal check's tests run MLX's own kernels from them; never committed),
## and the Metal check's real-world corpus: crates shipping .metal sources, pinned in
## crates/msl/tests/corpus/Cargo.toml, fetched into cargo's registry (listed in target/msl-corpus;
## the emulator runs kernels of it too).
deps:
	@command -v g++ >/dev/null || (apt-get update && apt-get install -y g++)
	@found=; for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do \
	  command -v $$c >/dev/null && found=$$c; done; \
	  [ -n "$$found$$KERNELGEN_MSL_CLANG" ] || (apt-get update && apt-get install -y clang)
	@python3 -c "import numpy, pytest" 2>/dev/null || python3 -m pip install --quiet numpy pytest
	bash crates/emu/tests/mlx-metal/fetch.sh
	bash crates/msl/tests/corpus/fetch.sh

## Unit, snapshot, CLI and emulator tests (the Metal check's corpus of invalid MSL, the generated
## kernels, the seeds and MLX's headers among them: deps fetched the headers, so no test may skip
## them), then every kernel verified in the emulator. The slow tests are `make test-slow`'s.
test: deps test-build
	$(TESTED_KERNELGEN) check
	KERNELGEN_MLX_METAL_REQUIRED=1 $(CARGO) test --workspace
	KERNELGEN_BIN=$(TESTED_KERNELGEN) python3 -m pytest -q tests/python
	$(CARGO) test --manifest-path examples/downstream/Cargo.toml
	$(CARGO) test --manifest-path examples/softcap_argmax/Cargo.toml
	$(TESTED_KERNELGEN) verify

## Every test binary of the workspace, and target/debug/kernelgen with them. The build compiles
## the generated catalog: when it fails, `kernelgen check` (the CLI alone builds without the
## catalog) says whether generated/ is stale.
test-build:
	@$(CARGO) test --workspace --no-run || { echo "make test-build: the build failed; is generated/ fresh? (kernelgen check)" >&2; \
	  $(KERNELGEN) check; exit 1; }

## The slow tests, which `make test` builds but leaves out (`#[ignore]`d) and .ci/run runs:
## the proc-macros' compile errors (trybuild builds their dependencies again), the tutorial
## run end to end (it builds and tests the tutorial's crate), the vocabulary head's verify
## under 1 GiB, every bundled kernel with several emulator workers in every run order against
## one worker, the Metal check of all 90 of MLX's kernel headers, and of the real-world corpus
## (crates/msl/tests/real_world.rs: crates shipping .metal sources, fetched by make deps), and
## kernels of that corpus run in the emulator against references (crates/emu/tests/real_world_kernels.rs).
## One command over the workspace: `make test`'s build serves it as it is (`--package` alone would
## unify the crates' features differently and rebuild them).
test-slow: deps
	KERNELGEN_MLX_METAL_REQUIRED=1 $(CARGO) test --workspace --test integration --test compile_fail -- --ignored

## What publishing needs: the API docs build without a warning (the macros' re-export
## included), and every published crate packages and builds alone from its .crate file
## (cargo packages the workspace through a temporary local registry; kernelgen-macros-ui,
## the compile-fail tests, is publish = false). cargo's notes on the tests and benches a package
## leaves out are filtered.
package: SHELL := /bin/bash
package:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --features kernelgen/macros
	@# cargo treats a registry crate of a known version as unchanged: it reuses the copy it
	@# extracted under $$CARGO_HOME/registry/src/-<hash>/ and its build in the target
	@# directory (whose dep-info lists no source file), though the temporary registry's
	@# crates change from run to run. Both are dropped for this workspace's crates, so every
	@# run verifies its own sources, and the dependencies' builds are still shared.
	rm -rf $${CARGO_HOME:-$$HOME/.cargo}/registry/src/-*/kernelgen-*[0-9]
	find $(CARGO_TARGET_DIR)/debug/.fingerprint -path '*/kernelgen-*/dep-lib-*' -size -24c -printf '%h\n' 2>/dev/null | xargs -r rm -rf
	@# The packages build unoptimized: cargo verifies that they build, and the dev profile's
	@# opt-level 3 for this workspace's crates .cargo/config.toml names (the emulator, the
	@# references, the Metal check and the CLI, which only `verify` and the tests need)
	@# would cost minutes here.
	set -o pipefail; $(CARGO) package --workspace --exclude kernelgen-macros-ui --allow-dirty \
	    $(foreach p,$(OPTIMIZED_CRATES),--config 'profile.dev.package.$(p).opt-level=0') 2>&1 \
	  | grep -v -e '^warning: ignoring \(test\|benchmark\|example\) `[^`]*` as `[^`]*` is not included in the published package$$'

## Every CUDA body compiled as MLX's CUDA backend compiles it, without a GPU: nvrtc 13.0 for an
## H200 (sm_90) against MLX 0.32.2's device headers and CUDA 13.0's, fetched from PyPI at pinned
## versions into target/nvrtc (crates/cuda/nvrtc/fetch.sh). A refused source fails at its line; the
## table gives each kernel's registers, spills and what they leave an SM (target/check-cuda.md).
check-cuda: deps cli
	bash crates/cuda/nvrtc/fetch.sh
	KERNELGEN_NVRTC_REQUIRED=1 KERNELGEN_BIN=$(TESTED_KERNELGEN) python3 -m pytest -q tests/python/test_cuda_check.py
	mkdir -p target
	python3 crates/cuda/nvrtc/check.py > target/check-cuda.md
	cat target/check-cuda.md

## The same kernels built with AddressSanitizer and UBSan.
test-sanitize: deps test-build
	$(TESTED_KERNELGEN) verify --sanitize

## Spec fuzzing for longer than `make test` does (8 s there): mutations of the bundled specs through the
## generator and the binary; no panic, exit codes 0/1/2 only, every error with file:line:col, successes
## deterministic. FUZZ_SECS sets the duration, FUZZ_SEED replays a run.
FUZZ_SECS ?= 300
fuzz:
	KERNELGEN_FUZZ_SECS=$(FUZZ_SECS) $(if $(FUZZ_SEED),KERNELGEN_FUZZ_SEED=$(FUZZ_SEED)) \
	  $(CARGO) test --workspace --test integration -- --nocapture fuzz::

## Benchmarks: catalog generation, emulator throughput and build times.
bench: deps
	$(CARGO) bench --workspace

-include mlx/mlx.mk
-include apple/apple.mk
-include gpu/gpu.mk

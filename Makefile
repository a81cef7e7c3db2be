# kernelgen: `make generate` regenerates generated/ from specs/; `make test` runs everything CI runs by default.
# Everything the build needs is installed here (Rust and g++ come with the machine).

CARGO     ?= cargo
KERNELGEN  = $(CARGO) run --quiet --package kernelgen-cli --

.PHONY: generate check test test-sanitize bench deps

## Regenerate generated/ (MSL, launcher Rust, manifest) from specs/ and templates/.
generate:
	$(KERNELGEN) generate

## Exit 1, listing every stale, missing or orphaned file, if generated/ is not fresh.
check:
	$(KERNELGEN) check

## Build tools the emulator needs (g++ compiles the Metal kernels as C++).
deps:
	@command -v g++ >/dev/null || (apt-get update && apt-get install -y g++)

## Unit, snapshot, CLI and emulator tests, then every kernel verified in the emulator.
test: deps
	$(KERNELGEN) check
	$(CARGO) test --workspace
	$(KERNELGEN) verify

## The same kernels built with AddressSanitizer and UBSan.
test-sanitize: deps
	$(KERNELGEN) verify --sanitize

## Benchmarks: catalog generation, emulator throughput and build times.
bench: deps
	$(CARGO) bench --workspace

-include mlx/mlx.mk

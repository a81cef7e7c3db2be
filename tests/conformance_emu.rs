//! The conformance suite (`tests/conformance/`) on the emulator's backend.

#[macro_use]
mod conformance;
#[path = "conformance/emu.rs"]
mod emu;

conformance_tests!(emu::Emu::new());

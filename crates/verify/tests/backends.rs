//! The values stage on a backend that is not the emulator: its arrays are made from the case's
//! host bytes, the kernel is launched once through the launch checks, and its outputs are read
//! back and compared with the same reference (the path MLX's backend takes). The property stage
//! stays the emulator's.

use kernelgen::backend::{Backend, Checked};
use kernelgen::launch::ArgInfo;
use kernelgen_codegen::Config;
use kernelgen_emu::{EmuBackend, EmuError, HostArray};
use kernelgen_verify::{Options, Values, VerifyBackend, verify_kernel};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The emulator as a plain backend: it does not say it is the emulator, and counts its
/// launches and transfers.
struct Plain {
    emu: EmuBackend,
    launches: AtomicUsize,
    uploads: AtomicUsize,
    downloads: AtomicUsize,
}

impl Backend for Plain {
    type Array = HostArray;
    type Error = EmuError;

    fn describe(&self, array: &HostArray) -> ArgInfo {
        self.emu.describe(array)
    }

    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<HostArray>, EmuError> {
        self.launches.fetch_add(1, Ordering::Relaxed);
        let inner = launch.for_inner(&self.emu).unwrap_or_else(|e| panic!("the emulator refuses what it accepted: {e}"));
        self.emu.run(&inner)
    }
}

impl VerifyBackend for Plain {
    fn upload(&self, array: &HostArray) -> Result<HostArray, EmuError> {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        Ok(array.clone())
    }

    fn download(&self, array: &HostArray) -> Result<HostArray, EmuError> {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        Ok(array.clone())
    }
}

#[test]
fn the_values_stage_runs_on_any_backend_with_host_transfers() {
    let specs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../specs");
    let config = Config::new().specs(specs);
    let generated = config.load().and_then(|input| config.generate(input)).unwrap_or_else(|e| panic!("{e}"));
    let options = Options { seed: 3, ..Options::default() };
    let plain = Plain { emu: EmuBackend::with_defaults().expect("emulator"), launches: AtomicUsize::new(0), uploads: AtomicUsize::new(0), downloads: AtomicUsize::new(0) };
    let emu = EmuBackend::with_defaults().expect("emulator");
    // one kernel with a host-integer input, one with three outputs
    for (name, sizes) in [("small_delta_state_bf16_f32", "B=2,T=3"), ("small2_silu_rms_heads_f32", "B=2,S=3")] {
        let r = generated.kernels.iter().find(|r| r.kernel.name == name).unwrap_or_else(|| panic!("no kernel {name}"));
        let before = plain.launches.load(Ordering::Relaxed);
        let on_plain = verify_kernel(&plain, r, &options);
        let values = on_plain.result.as_ref().unwrap_or_else(|e| panic!("{name}: {e}")).clone();
        assert!(matches!(values, Values::Model { .. }), "{name}: {values:?}");
        assert_eq!(plain.launches.load(Ordering::Relaxed) - before, 1, "{name}: one launch, no property runs");
        // the emulator's forward run gives the same bits: the same comparison
        let on_emu = verify_kernel(&emu, r, &options).result.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(values, on_emu, "{name}");
        assert_eq!(on_plain.sizes, sizes);
    }
    assert!(plain.uploads.load(Ordering::Relaxed) >= 8 && plain.downloads.load(Ordering::Relaxed) == 4, "inputs made from host bytes, outputs read back");
}

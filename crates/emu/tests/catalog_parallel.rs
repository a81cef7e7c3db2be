//! Every bundled kernel (`kernelgen::kernels::CATALOG`) gives the same output bits with
//! several workers as with one, in every run order: forward, reverse and seeded shuffles.
//! Inputs are seeded random values of each dtype (kept lengths within their bound), at
//! small run-time sizes; the outputs are compared byte for byte, poison included. The two
//! vocabulary heads run forward and shuffled on several workers only.

use kernelgen::backend;
use kernelgen::contract::{Dtype, KernelDef, Source};
use kernelgen::kernels::CATALOG;
use kernelgen_emu::host::HostArray;
use kernelgen_emu::{EmuBackend, EmuOptions, RunOrder};

/// The run-time size every kernel is launched at (`T` longer, to run several steps).
fn size_of(name: &str) -> u64 {
    match name {
        "T" => 5,
        _ => 3,
    }
}

/// kernelgen's one generator, with floats of 24 random bits in `[-1, 1)`.
struct Rng(kernelgen_reference::SplitMix64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// The data inputs as arrays and the host-integer inputs (kept lengths, within their bound).
fn inputs(def: &KernelDef, seed: u64) -> (Vec<HostArray>, Vec<Vec<i32>>) {
    let sizes: Vec<u64> = def.sizes.iter().map(|s| size_of(s)).collect();
    let mut rng = Rng(kernelgen_reference::SplitMix64::new(seed));
    let host = def
        .inputs
        .iter()
        .filter(|b| b.source == Source::HostInts)
        .map(|b| {
            let n = b.elements(&sizes).expect("elements");
            let bound = b.at_most.map_or(1, |k| sizes[k]);
            (0..n).map(|_| (rng.next() % (bound + 1)) as i32).collect()
        })
        .collect();
    let arrays = def
        .inputs
        .iter()
        .filter(|b| b.source == Source::Data)
        .map(|b| {
            let shape = b.shape_at(&sizes).expect("shape");
            let n: u64 = shape.iter().product();
            let mut data = Vec::with_capacity(n as usize * b.dtype.size());
            match (b.dtype, b.at_most) {
                (Dtype::I32, Some(k)) => (0..n).for_each(|_| data.extend_from_slice(&((rng.next() % (sizes[k] + 1)) as i32).to_le_bytes())),
                (Dtype::F32, _) => (0..n).for_each(|_| data.extend_from_slice(&rng.unit().to_le_bytes())),
                (Dtype::Bf16, _) => (0..n).for_each(|_| data.extend_from_slice(&half::bf16::from_f32(rng.unit()).to_le_bytes())),
                (Dtype::F16, _) => (0..n).for_each(|_| data.extend_from_slice(&half::f16::from_f32(rng.unit()).to_le_bytes())),
                (Dtype::Bool, _) => (0..n).for_each(|_| data.push((rng.next() & 1) as u8)),
                (Dtype::U8, _) => {
                    // packed slots: random bits (scales may be NaN: still the same bits)
                    while (data.len() as u64) < n {
                        data.extend_from_slice(&rng.next().to_le_bytes());
                    }
                    data.truncate(n as usize);
                }
                (other, _) => {
                    let bytes = n as usize * other.size();
                    while data.len() < bytes {
                        data.extend_from_slice(&rng.next().to_le_bytes());
                    }
                    data.truncate(bytes);
                }
            }
            HostArray::new(b.dtype, shape, data)
        })
        .collect();
    (arrays, host)
}

#[test]
#[ignore = "slow (every bundled kernel at its production size, five times): `make test-slow`, in .ci/run"]
fn every_bundled_kernel_gives_the_serial_bits_with_several_workers_in_every_order() {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
    let emu = |order, workers| EmuBackend::new(EmuOptions { order, workers, ..Default::default() }).expect("emulator");
    let serial = emu(RunOrder::Forward, 1);
    let parallel: Vec<(RunOrder, EmuBackend)> = [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(0x5eed)]
        .into_iter()
        .map(|o| (o, emu(o, workers)))
        .collect();
    let serial_shuffled = emu(RunOrder::Shuffle(0x5eed), 1);
    assert!(CATALOG.len() >= 60, "the catalog has {} kernels", CATALOG.len());
    for (k, def) in CATALOG.iter().enumerate() {
        let (arrays, host) = inputs(def, 0x1234 + k as u64);
        let refs: Vec<&HostArray> = arrays.iter().collect();
        let host: Vec<&[i32]> = host.iter().map(|h| h.as_slice()).collect();
        let want = backend::launch_vec(&serial, def, &refs, &host).unwrap_or_else(|e| panic!("{}: {e}", def.name));
        // A vocabulary head (635 MB of weights, a second or two per launch) runs in the
        // orders that differ most from one worker's forward run: `kernelgen verify` runs it
        // in reverse order on every worker too.
        let large = arrays.iter().map(|a| a.data.len()).sum::<usize>() > kernelgen_emu::host::LARGE_INPUT_BYTES as usize;
        for (order, b) in &parallel {
            if large && *order == RunOrder::Reverse {
                continue;
            }
            let got = backend::launch_vec(b, def, &refs, &host).unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert!(got == want, "{}: {workers} workers in {order:?} differ from one worker in forward order", def.name);
        }
        if large {
            continue;
        }
        // one worker in a shuffled order: the same bits too (the kernels have no races)
        let got = backend::launch_vec(&serial_shuffled, def, &refs, &host).unwrap_or_else(|e| panic!("{}: {e}", def.name));
        assert!(got == want, "{}: one worker shuffled differs from forward", def.name);
    }
}

//! The manifest's bytes per launch, checked against the buffers: for every
//! bundled kernel at several run-time sizes, what `generated/manifest.json`
//! says (read back the way `kernelgen diff` reads it) equals the sum of the
//! buffers' bytes computed here from the compiled `KernelDef`s (every input
//! read once, every output written once; a packed buffer counts only the
//! regions its part reads), and equals the contract's own cost expressions. A
//! kernel reading an array of packed buffers (the grouped experts' slots) states
//! its cost per (token, route) pair instead: its manifest agrees with its
//! contract, and it reads the regions once per pair.

use kernelgen::contract::{BufferDef, KernelDef};
use kernelgen_review::view::{read_manifest, Sizes};
use std::collections::BTreeMap;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The bytes a launch moves for one buffer, from the contract alone.
fn buffer_bytes(b: &BufferDef, sizes: &[u64]) -> u64 {
    if b.regions.is_empty() {
        b.bytes(sizes).expect("evaluates")
    } else {
        b.regions.iter().map(|r| r.bytes).sum()
    }
}

#[test]
fn manifest_bytes_per_launch_is_the_sum_of_the_buffers() {
    let manifest = std::fs::read_to_string(root().join("generated/manifest.json")).unwrap();
    let views = read_manifest(&manifest, &|_| None).unwrap();
    let catalog: &[&KernelDef] = kernelgen::kernels::CATALOG;
    assert_eq!(views.len(), catalog.len());
    let mut packed_parts = 0;
    for def in catalog {
        let view = views.iter().find(|v| v.name == def.name).unwrap_or_else(|| panic!("{} is not in the manifest", def.name));
        assert!(view.cost.is_some(), "{}: the manifest has no cost", def.name);
        let n = def.sizes.len();
        let cases: Vec<Vec<u64>> = vec![vec![1; n], vec![2; n], (0..n as u64).map(|i| 3 + 2 * i).collect(), vec![64; n], (0..n as u64).map(|i| 1000 - 999 * (i % 2)).collect()];
        let arrays_of_packed = def.inputs.iter().any(|b| !b.regions.is_empty() && b.shape.len() > 1);
        for sizes in cases {
            let named = Sizes(def.sizes.iter().map(|s| s.to_string()).zip(sizes.iter().copied()).collect::<BTreeMap<_, _>>());
            let launch = view.launch(&named);
            let at = format!("{} at {sizes:?}", def.name);
            if arrays_of_packed {
                assert_eq!(launch.bytes_read, def.cost.bytes_read.eval(&sizes), "{at}: bytes read");
                assert_eq!(launch.bytes_written, def.cost.bytes_written.eval(&sizes), "{at}: bytes written");
                // every other input once, and the regions read once per (token, route) pair: as
                // many pairs as the index input (`experts`, [M, K]) has elements
                let (arrays, others): (Vec<&BufferDef>, Vec<&BufferDef>) = def.inputs.iter().partition(|b| !b.regions.is_empty() && b.shape.len() > 1);
                let pairs = def.inputs.iter().find(|b| b.name == "experts").and_then(|b| b.elements(&sizes)).expect("the grouped parts index their slots by `experts`");
                let regions: u64 = arrays.iter().flat_map(|b| b.regions.iter().map(|r| r.bytes)).sum();
                let read = others.iter().map(|b| buffer_bytes(b, &sizes)).sum::<u64>() + pairs * regions;
                let written: u64 = def.outputs.iter().map(|b| buffer_bytes(b, &sizes)).sum();
                assert_eq!(def.cost.bytes_read.eval(&sizes), Some(read), "{at}: the contract's bytes read");
                assert_eq!(def.cost.bytes_written.eval(&sizes), Some(written), "{at}: the contract's bytes written");
                continue;
            }
            let read: u64 = def.inputs.iter().map(|b| buffer_bytes(b, &sizes)).sum();
            let written: u64 = def.outputs.iter().map(|b| buffer_bytes(b, &sizes)).sum();
            assert_eq!(launch.bytes_read, Some(read), "{at}: bytes read");
            assert_eq!(launch.bytes_written, Some(written), "{at}: bytes written");
            assert_eq!(def.cost.bytes_read.eval(&sizes), Some(read), "{at}: the contract's bytes read");
            assert_eq!(def.cost.bytes_written.eval(&sizes), Some(written), "{at}: the contract's bytes written");
            assert_eq!(launch.flops, def.cost.flops.as_ref().and_then(|f| f.eval(&sizes)), "{at}: flops");
        }
        // A part of a packed buffer counts its regions, not the whole buffer.
        for b in def.inputs.iter().filter(|b| !b.regions.is_empty()) {
            packed_parts += 1;
            let whole = b.packed_bytes().unwrap();
            assert!(b.regions.iter().map(|r| r.bytes).sum::<u64>() < whole, "{}: `{}` counts {} of its {whole} bytes", def.name, b.name, b.regions.iter().map(|r| r.bytes).sum::<u64>());
        }
    }
    assert!(packed_parts > 0, "the bundled experts read packed slots");
}

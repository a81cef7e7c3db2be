//! Acceptance: every kernel kernelgen generates (the repo's generated/metal/) is valid MSL.
mod common;

use std::time::Instant;

#[test]
fn every_generated_kernel_passes() {
    let dir = common::crate_dir().join("../../generated/metal");
    let files = common::files(&dir, "metal");
    assert!(!files.is_empty(), "no kernels under {}", dir.display());
    let c = common::checker();
    let mut failures = Vec::new();
    let start = Instant::now();
    for f in &files {
        let name = f.strip_prefix(common::crate_dir().join("../..")).unwrap_or(f).display().to_string();
        if let Err(problems) = c.check(&common::read(f), &name, &[]) {
            failures.extend(problems.iter().map(|p| p.to_string()));
        }
    }
    let per = start.elapsed().as_secs_f64() / files.len() as f64;
    println!("{} generated kernels checked, {:.0} ms per kernel", files.len(), per * 1000.0);
    assert!(failures.is_empty(), "{} problems:\n{}", failures.len(), failures.join("\n"));
}

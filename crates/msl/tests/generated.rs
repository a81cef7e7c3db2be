//! Acceptance: every kernel kernelgen generates (the repo's generated/metal/) is valid MSL.
use crate::common;

use std::time::Instant;

#[test]
fn every_generated_kernel_passes() {
    let dir = common::crate_dir().join("../../generated/metal");
    let files = common::files(&dir, "metal");
    assert!(!files.is_empty(), "no kernels under {}", dir.display());
    let c = common::checker();
    let start = Instant::now();
    let failures: Vec<String> = common::par_map(&files, |f| {
        let name = f.strip_prefix(common::crate_dir().join("../..")).unwrap_or(f).display().to_string();
        match c.check(&common::read(f), &name, &[]) {
            Ok(()) => Vec::new(),
            Err(problems) => problems.iter().map(|p| p.to_string()).collect(),
        }
    })
    .concat();
    let per = start.elapsed().as_secs_f64() / files.len() as f64;
    println!("{} generated kernels checked, {:.0} ms per kernel (wall, on every core)", files.len(), per * 1000.0);
    assert!(failures.is_empty(), "{} problems:\n{}", failures.len(), failures.join("\n"));
}

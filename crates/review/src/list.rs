//! `kernelgen list`'s cost columns: bytes per launch and roofline time of
//! every kernel of a generated tree, read from its manifest as a review reads
//! it, and what the columns mean, with every kernel's warnings.

use super::compare::{kernels, Tree};
use super::gpu::{self, Gpu};
use super::view::{KernelView, Sizes};
use super::{human_bytes, warnings};

/// The cost columns of one generated tree, on one GPU, at some sizes.
pub struct ListCosts {
    gpu: &'static Gpu,
    sizes: Sizes,
    /// In the manifest's order.
    kernels: Vec<KernelView>,
}

impl ListCosts {
    /// Reads the tree's manifest.
    pub fn new(tree: &Tree, gpu: &'static Gpu, sizes: Sizes) -> Result<ListCosts, String> {
        Ok(ListCosts { gpu, sizes, kernels: kernels(tree)? })
    }

    /// The tree's kernels.
    pub fn kernels(&self) -> &[KernelView] {
        &self.kernels
    }

    /// The column titles.
    pub fn header(&self) -> [String; 2] {
        ["BYTES/LAUNCH".into(), format!("ROOFLINE {}", self.gpu.key.to_uppercase())]
    }

    /// Bytes per launch and roofline time of one kernel; `?` for a kernel the
    /// manifest does not have or whose bytes do not evaluate.
    pub fn cells(&self, name: &str) -> [String; 2] {
        let Some(k) = self.kernels.iter().find(|k| k.name == name) else { return ["?".into(), "?".into()] };
        let l = k.launch(&self.sizes);
        match l.bytes() {
            Some(b) => {
                let r = self.gpu.roofline(b, l.flops);
                let bound = match r.bound {
                    gpu::Bound::Memory => "mem",
                    gpu::Bound::Compute => "compute",
                    gpu::Bound::MemoryOnly => "mem*",
                };
                [human_bytes(b), format!("{} {bound}", gpu::seconds(r.seconds))]
            }
            None => ["?".into(), "?".into()],
        }
    }

    /// The lines under the table: what the cost columns mean, then every kernel's warnings.
    pub fn footer(&self) -> Vec<String> {
        let given = self.sizes.0.iter().map(|(k, v)| format!("{k}={v}, ")).collect::<String>();
        let mut lines = vec![
            format!("BYTES/LAUNCH and ROOFLINE at {given}every other run-time size = 1 (--size NAME=VALUE), on {} (--gpu NAME; --gpu help lists them)", self.gpu.summary()),
            "  roofline = max(bytes / bandwidth, flops / FP32 peak); mem* = memory time only: the family states no flops".to_string(),
        ];
        for k in &self.kernels {
            for (_, message) in warnings(k, &self.sizes) {
                lines.push(format!("warning: {}: {message}", k.name));
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{kernel, tree};
    use serde_json::json;

    #[test]
    fn columns_and_warnings_of_every_kernel() {
        let mut big = kernel("big", &["M"], &["M", "1024"], [1024, 1, 1], 0, "  x;");
        big.0["cost"] = json!({"bytes_read": "4096*M", "bytes_written": "16", "flops": "1000000000*M"});
        let small = kernel("small", &[], &["8"], [32, 1, 1], 0, "  x;");
        let t = tree("the specs", &[big, small]);
        let sizes = Sizes([("M".to_string(), 100), ("Q".to_string(), 3)].into());
        let costs = ListCosts::new(&t, gpu::find("m2-max").unwrap(), sizes.clone()).unwrap();
        assert_eq!(costs.header(), ["BYTES/LAUNCH", "ROOFLINE M2-MAX"]);
        // 409,616 B and 1e11 flops: compute-bound on an M2 Max (13.6 TFLOPS).
        assert_eq!(costs.cells("big"), ["410 kB", "7.35 ms compute"]);
        // An old manifest entry without cost: its buffers' bytes, no flops.
        assert_eq!(costs.cells("small"), ["48 B", "0.12 ns mem*"]);
        assert_eq!(costs.cells("absent"), ["?", "?"]);
        let footer = costs.footer();
        assert!(footer[0].starts_with("BYTES/LAUNCH and ROOFLINE at M=100, Q=3, every other run-time size = 1"), "{footer:?}");
        assert_eq!(footer.iter().filter(|l| l.starts_with("warning: big: 1024 threads per threadgroup")).count(), 1, "{footer:?}");
        assert_eq!(footer.len(), 3, "{footer:?}");
        assert_eq!(sizes.unknown(&costs.kernels().iter().collect::<Vec<_>>()), ["Q"]);
    }
}

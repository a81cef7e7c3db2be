//! A kernel as a generated tree describes it: its `manifest.json` entry, its
//! `.metal` text and, where it has a CUDA body, its `.cu` text. Both sides of a review are read this way (the tree the
//! specs generate now, in memory, and a committed revision or a folder), so
//! like is compared with like. Manifests older than the cost model have no
//! `cost`; their bytes per launch are derived from the buffers, as the
//! generator's default cost is (a packed buffer counts its declared regions,
//! the regions the kernel reads). Dimensions and costs are read back with
//! [`Dim::parse`], the inverse of the [`Dim::describe`] that wrote them.

use kernelgen_contract::{Dim, Dtype};
use serde_json::Value;
use std::collections::BTreeMap;

/// One buffer of a manifest entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferView {
    /// The buffer's argument name (`x`).
    pub name: String,
    /// Its element type as the manifest spells it (`bf16`, `u8`).
    pub dtype: String,
    /// Each dimension (`M`, `6144`).
    pub shape: Vec<SizeExpr>,
    /// `(name, offset, bytes)` of a packed buffer's regions.
    pub regions: Vec<(String, u64, u64)>,
}

impl BufferView {
    /// `bf16[M, 6144]`
    pub fn describe(&self) -> String {
        format!("{}[{}]", self.dtype, self.shape.iter().map(|d| d.text.as_str()).collect::<Vec<_>>().join(", "))
    }

    /// Elements at the given values of its kernel's run-time sizes
    /// ([`Sizes::values`]); `None` if a dimension does not evaluate.
    pub fn elements(&self, values: &[u64]) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(d.eval(values)?))
    }

    /// The bytes a launch moves for this buffer: its regions for a packed
    /// buffer, else elements times the element size.
    pub fn bytes(&self, values: &[u64]) -> Option<u64> {
        if !self.regions.is_empty() {
            return self.regions.iter().try_fold(0u64, |acc, r| acc.checked_add(r.2));
        }
        self.elements(values)?.checked_mul(Dtype::parse(&self.dtype)?.size() as u64)
    }
}

/// An integer expression of a manifest entry (a dimension, a cost) over its
/// kernel's run-time sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeExpr {
    /// As the manifest writes it (`12288*M + 100`): what a review shows.
    pub text: String,
    /// What the text reads as with the kernel's size names ([`Dim::parse`]);
    /// `None` if it does not parse, and then it has no value.
    pub dim: Option<Dim>,
}

impl SizeExpr {
    /// `text` read with the kernel's size names.
    pub fn parse(text: &str, names: &[String]) -> SizeExpr {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        SizeExpr { text: text.to_string(), dim: Dim::parse(text, &names).ok() }
    }

    /// The value at the given values of the kernel's run-time sizes; `None` if
    /// it does not parse or evaluate.
    pub fn eval(&self, values: &[u64]) -> Option<u64> {
        self.dim.as_ref()?.eval(values)
    }

    /// Whether its value depends on run-time sizes (a text that does not parse
    /// may: it counts as depending).
    pub fn depends_on_sizes(&self) -> bool {
        self.dim.as_ref().is_none_or(|d| !d.sizes_used().is_empty())
    }
}

/// A manifest entry's `cost`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostView {
    /// The bytes one launch reads.
    pub bytes_read: SizeExpr,
    /// The bytes one launch writes.
    pub bytes_written: SizeExpr,
    /// The flops of one launch, when the family states them.
    pub flops: Option<SizeExpr>,
}

/// A kernel's CUDA body as a generated tree describes it (the manifest entry's `cuda`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaView {
    /// The `.cu` path relative to the generated tree (`cuda/experts/x.cu`).
    pub path: String,
    /// The path the manifest gives (`generated/cuda/experts/x.cu`).
    pub manifest_path: String,
    /// The `.cu` text; `None` if the tree lacks the file.
    pub text: Option<String>,
    /// Threads in a block, x y z (the threadgroup unless the family gives the body its own).
    pub threadgroup: [u64; 3],
}

/// One kernel of a generated tree.
#[derive(Clone, Debug)]
pub struct KernelView {
    /// The kernel's name; kernels of the same name on both sides are compared.
    pub name: String,
    /// The family it was generated from (empty if the entry has none).
    pub family: String,
    /// The spec that asked for it (`specs/e.toml`; empty if the entry has none).
    pub spec: String,
    /// The `.metal` path relative to the generated tree (`metal/experts/x.metal`).
    pub metal_path: String,
    /// The path the manifest gives (`generated/metal/experts/x.metal`).
    pub manifest_metal: String,
    /// The `.metal` text; `None` if the tree lacks the file.
    pub metal: Option<String>,
    /// The CUDA body; `None` for a Metal-only kernel (or a manifest older than CUDA bodies).
    pub cuda: Option<CudaView>,
    /// The run-time sizes it takes at launch (`M`).
    pub sizes: Vec<String>,
    /// The input buffers, in argument order.
    pub inputs: Vec<BufferView>,
    /// The output buffers, after the inputs.
    pub outputs: Vec<BufferView>,
    /// Threads in the grid, x y z, as expression text (MLX counts threads, not threadgroups).
    pub grid: Vec<String>,
    /// Threads in a threadgroup, x y z.
    pub threadgroup: [u64; 3],
    /// Threadgroup memory the kernel declares, in bytes.
    pub threadgroup_memory: u64,
    /// `None` for a manifest older than the cost model.
    pub cost: Option<CostView>,
    /// The whole entry, for fields a review does not model.
    pub entry: serde_json::Map<String, Value>,
}

/// What one launch moves and computes at some sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Bytes read; `None` if they do not evaluate at these sizes.
    pub bytes_read: Option<u64>,
    /// Bytes written; `None` if they do not evaluate at these sizes.
    pub bytes_written: Option<u64>,
    /// Flops; `None` if not stated, not evaluable, or the manifest has no `cost`.
    pub flops: Option<u64>,
    /// The bytes were derived from the buffers (the manifest has no `cost`).
    pub derived: bool,
}

impl Launch {
    /// Bytes read plus written; `None` if either is unknown or the sum overflows.
    pub fn bytes(&self) -> Option<u64> {
        self.bytes_read?.checked_add(self.bytes_written?)
    }
}

/// Run-time sizes to evaluate at: every size is 1 unless given
/// (`--size M=4`): one row, one token, one sequence, the decode step the
/// bundled kernels run most often, and the smallest launch a spec allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sizes(pub BTreeMap<String, u64>);

impl Sizes {
    /// A size's value: the one given, else 1.
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(1)
    }

    /// The values of a kernel's run-time sizes, in its order ([`KernelView::sizes`]).
    pub fn values(&self, names: &[String]) -> Vec<u64> {
        names.iter().map(|n| self.get(n)).collect()
    }

    /// The names given that none of `kernels` has as a run-time size (a typo
    /// would silently cost nothing).
    pub fn unknown<'a>(&'a self, kernels: &[&KernelView]) -> Vec<&'a str> {
        self.0.keys().filter(|name| !kernels.iter().any(|k| k.sizes.contains(name))).map(String::as_str).collect()
    }

    /// `M=1, B=1` for the sizes a kernel has.
    pub fn describe(&self, names: &[String]) -> String {
        names.iter().map(|n| format!("{n}={}", self.get(n))).collect::<Vec<_>>().join(", ")
    }
}

impl KernelView {
    /// Threads per threadgroup: the product of [`KernelView::threadgroup`].
    pub fn threads(&self) -> u64 {
        self.threadgroup.iter().product()
    }

    /// The inputs, then the outputs.
    pub fn buffers(&self) -> impl Iterator<Item = &BufferView> {
        self.inputs.iter().chain(&self.outputs)
    }

    /// Bytes and flops of one launch at `sizes`.
    pub fn launch(&self, sizes: &Sizes) -> Launch {
        let values = sizes.values(&self.sizes);
        match &self.cost {
            Some(c) => Launch {
                bytes_read: c.bytes_read.eval(&values),
                bytes_written: c.bytes_written.eval(&values),
                flops: c.flops.as_ref().and_then(|f| f.eval(&values)),
                derived: false,
            },
            None => {
                let sum = |bs: &[BufferView]| bs.iter().try_fold(0u64, |acc, b| acc.checked_add(b.bytes(&values)?));
                Launch { bytes_read: sum(&self.inputs), bytes_written: sum(&self.outputs), flops: None, derived: true }
            }
        }
    }
}

/// Reads a `manifest.json` and looks up each kernel's `.metal` with `file`
/// (a path relative to the generated tree). Unknown fields are kept in
/// `entry`; missing optional ones (`cost`) are `None`.
pub fn read_manifest(text: &str, file: &dyn Fn(&str) -> Option<String>) -> Result<Vec<KernelView>, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("manifest.json is not JSON: {e}"))?;
    let kernels = root.get("kernels").and_then(Value::as_array).ok_or("manifest.json has no `kernels` list")?;
    let mut out = Vec::with_capacity(kernels.len());
    for (n, k) in kernels.iter().enumerate() {
        let entry = k.as_object().ok_or_else(|| format!("manifest.json: kernels[{n}] is not an object"))?;
        let name = str_field(entry, "name").ok_or_else(|| format!("manifest.json: kernels[{n}] has no name"))?;
        let bad = |field: &str| format!("manifest.json: kernel {name}: `{field}` is missing or malformed");
        let strings = |v: Option<&Value>| -> Option<Vec<String>> { v?.as_array()?.iter().map(|s| s.as_str().map(str::to_string)).collect() };
        let sizes = strings(entry.get("sizes")).ok_or_else(|| bad("sizes"))?;
        let expr = |text: &str| SizeExpr::parse(text, &sizes);
        let buffers = |field: &str| -> Result<Vec<BufferView>, String> {
            let list = entry.get(field).and_then(Value::as_array).ok_or_else(|| bad(field))?;
            list.iter()
                .map(|b| {
                    let regions = match b.get("regions") {
                        None => Vec::new(),
                        Some(r) => r
                            .as_array()
                            .and_then(|rs| {
                                rs.iter()
                                    .map(|r| Some((r.get("name")?.as_str()?.to_string(), r.get("offset")?.as_u64()?, r.get("bytes")?.as_u64()?)))
                                    .collect::<Option<Vec<_>>>()
                            })
                            .ok_or_else(|| bad(field))?,
                    };
                    Ok(BufferView {
                        name: b.get("name").and_then(Value::as_str).ok_or_else(|| bad(field))?.to_string(),
                        dtype: b.get("dtype").and_then(Value::as_str).ok_or_else(|| bad(field))?.to_string(),
                        shape: strings(b.get("shape")).ok_or_else(|| bad(field))?.iter().map(|d| expr(d)).collect(),
                        regions,
                    })
                })
                .collect()
        };
        let three = |v: Option<&Value>| -> Option<[u64; 3]> {
            let v: Option<Vec<u64>> = v?.as_array()?.iter().map(Value::as_u64).collect();
            v?.try_into().ok()
        };
        let threadgroup = three(entry.get("threadgroup")).ok_or_else(|| bad("threadgroup"))?;
        let cost = match entry.get("cost") {
            None | Some(Value::Null) => None,
            Some(c) => Some(CostView {
                bytes_read: c.get("bytes_read").and_then(Value::as_str).map(expr).ok_or_else(|| bad("cost"))?,
                bytes_written: c.get("bytes_written").and_then(Value::as_str).map(expr).ok_or_else(|| bad("cost"))?,
                flops: c.get("flops").and_then(Value::as_str).map(expr),
            }),
        };
        // The manifest names files from the project root (`generated/...`);
        // the tree is read relative to its own root.
        let in_tree = |manifest_path: &str| manifest_path.split_once('/').map_or(manifest_path, |(_, rest)| rest).to_string();
        let manifest_metal = str_field(entry, "metal").ok_or_else(|| bad("metal"))?;
        let metal_path = in_tree(&manifest_metal);
        let metal = file(&metal_path).or_else(|| file(&manifest_metal));
        let cuda = match entry.get("cuda") {
            None | Some(Value::Null) => None,
            Some(c) => {
                let manifest_path = c.get("path").and_then(Value::as_str).ok_or_else(|| bad("cuda"))?.to_string();
                let path = in_tree(&manifest_path);
                let text = file(&path).or_else(|| file(&manifest_path));
                // (a manifest from before CUDA blocks had their own shape: the threadgroup's)
                let threadgroup = match c.get("threadgroup") {
                    None => threadgroup,
                    t => three(t).ok_or_else(|| bad("cuda"))?,
                };
                Some(CudaView { path, manifest_path, text, threadgroup })
            }
        };
        out.push(KernelView {
            family: str_field(entry, "family").unwrap_or_default(),
            spec: str_field(entry, "spec").unwrap_or_default(),
            metal,
            metal_path,
            manifest_metal,
            cuda,
            inputs: buffers("inputs")?,
            outputs: buffers("outputs")?,
            grid: strings(entry.get("grid")).ok_or_else(|| bad("grid"))?,
            threadgroup,
            threadgroup_memory: entry.get("threadgroup_memory_bytes").and_then(Value::as_u64).ok_or_else(|| bad("threadgroup_memory_bytes"))?,
            cost,
            sizes,
            entry: entry.clone(),
            name,
        });
    }
    Ok(out)
}

fn str_field(entry: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    entry.get(key).and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = r#"{"generator": "kernelgen", "kernels": [{
        "name": "k", "family": "expert", "spec": "specs/e.toml", "metal": "generated/metal/e/k.metal",
        "sizes": ["M"], "grid": ["32", "M", "1"], "threadgroup": [32, 4, 1], "threadgroup_memory_bytes": 0,
        "inputs": [{"name": "x", "dtype": "bf16", "shape": ["M", "256"]},
                   {"name": "slot", "dtype": "u8", "shape": ["73728"], "regions": [
                      {"name": "w", "offset": 0, "bytes": 16384}, {"name": "s", "offset": 65536, "bytes": 512}]}],
        "outputs": [{"name": "y", "dtype": "f32", "shape": ["M", "128"]}]}]}"#;

    #[test]
    fn an_old_manifest_without_cost_derives_bytes_from_its_buffers() {
        let files = |p: &str| (p == "metal/e/k.metal").then(|| "kernel".to_string());
        let views = read_manifest(OLD, &files).unwrap();
        let k = &views[0];
        assert_eq!(k.metal.as_deref(), Some("kernel"));
        assert_eq!(k.threads(), 128);
        assert!(k.cost.is_none());
        let sizes = Sizes([("M".to_string(), 3)].into());
        let l = k.launch(&sizes);
        assert!(l.derived);
        // x: 3*256*2, the slot's two regions only, y: 3*128*4.
        assert_eq!(l.bytes_read, Some(3 * 256 * 2 + 16384 + 512));
        assert_eq!(l.bytes_written, Some(3 * 128 * 4));
        assert_eq!(l.flops, None);
        assert_eq!(k.inputs[0].describe(), "bf16[M, 256]");
    }

    #[test]
    fn expressions_read_with_the_kernels_size_names() {
        let deep = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
        let manifest = OLD.replace(r#""sizes": ["M"]"#, r#""sizes": ["M", "T"]"#).replace(r#"["M", "256"]"#, &format!(r#"["ceil_div(T, 64)*M", "N", "{deep}"]"#));
        let k = &read_manifest(&manifest, &|_| None).unwrap()[0];
        let [dims, unknown, hostile] = &k.inputs[0].shape[..] else { panic!("{:?}", k.inputs[0].shape) };
        assert_eq!(dims.eval(&Sizes([("M".to_string(), 3), ("T".to_string(), 65)].into()).values(&k.sizes)), Some(6));
        assert!(dims.depends_on_sizes());
        // A name that is not one of the kernel's sizes, and a text nested past the parser's
        // limit (a hostile manifest), have no value: the review shows `?`, it does not crash.
        assert_eq!((unknown.text.as_str(), &unknown.dim), ("N", &None));
        assert_eq!(hostile.dim, None);
        assert_eq!(k.launch(&Sizes::default()).bytes_read, None, "`x` has no byte count without the value of every dimension");
    }

    #[test]
    fn a_cuda_body_is_read_where_the_entry_has_one() {
        let with = OLD.replace(r#""metal": "generated/metal/e/k.metal","#, r#""metal": "generated/metal/e/k.metal", "cuda": {"path": "generated/cuda/e/k.cu", "mlx_name": "custom_kernel_k", "sha256": "0"},"#);
        let files = |p: &str| (p == "cuda/e/k.cu").then(|| "__global__".to_string());
        let cuda = read_manifest(&with, &files).unwrap()[0].cuda.clone();
        assert_eq!(cuda, Some(CudaView { path: "cuda/e/k.cu".into(), manifest_path: "generated/cuda/e/k.cu".into(), text: Some("__global__".into()), threadgroup: [32, 4, 1] }), "without its own block, the threadgroup");
        assert_eq!(read_manifest(OLD, &files).unwrap()[0].cuda, None);
        assert!(read_manifest(&with.replace(r#"{"path": "generated/cuda/e/k.cu","#, r#"{"#), &files).is_err(), "a cuda entry without a path");
    }

    #[test]
    fn malformed_manifests_are_errors_not_panics() {
        let none = |_: &str| None;
        for bad in ["", "[]", "{}", r#"{"kernels": [1]}"#, r#"{"kernels": [{"name": "k"}]}"#, &OLD.replace("[32, 4, 1]", "[32, 4]")] {
            assert!(read_manifest(bad, &none).is_err(), "{bad}");
        }
    }
}

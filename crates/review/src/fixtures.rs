//! Generated trees for the tests: manifest entries and their `.metal` files.

use crate::Tree;
use serde_json::json;
use std::collections::BTreeMap;

/// A manifest entry and its `.metal`.
pub fn kernel(name: &str, sizes: &[&str], x_shape: &[&str], threads: [u64; 3], tg_memory: u64, body: &str) -> (serde_json::Value, String, String) {
    let path = format!("metal/s/{name}.metal");
    let entry = json!({
        "name": name, "family": "fam", "spec": "specs/s.toml", "geometry": "g", "variant": {}, "part": null,
        "metal": format!("generated/{path}"), "mlx_name": format!("custom_kernel_{name}"), "sha256": "0",
        "sizes": sizes,
        "inputs": [{"name": "x", "dtype": "f32", "shape": x_shape}],
        "outputs": [{"name": "y", "dtype": "f32", "shape": ["4"]}],
        "grid": ["32", "1", "1"], "threadgroup": threads, "threads_per_threadgroup": threads.iter().product::<u64>(),
        "threadgroup_memory_bytes": tg_memory,
    });
    let metal = format!("// Generated: kernel {name}\n[[kernel]] void custom_kernel_{name}() {{\n{body}\n}}\n");
    (entry, path, metal)
}

/// A kernel of [`kernel`] with a CUDA body: its manifest entry's `cuda`, and the `.cu` (with
/// [`tree_with`]).
pub fn with_cuda(k: (serde_json::Value, String, String), body: &str) -> ((serde_json::Value, String, String), (String, String)) {
    let (mut entry, path, metal) = k;
    let name = entry["name"].as_str().unwrap().to_string();
    let cu = format!("cuda/s/{name}.cu");
    entry["cuda"] = json!({"path": format!("generated/{cu}"), "mlx_name": format!("custom_kernel_{name}"), "sha256": "0"});
    let text = format!("\n#include \"mlx/backend/cuda/device/utils.cuh\"\n// Generated: kernel {name}\n__global__ void custom_kernel_{name}() {{\n{body}\n}}\n");
    ((entry, path, metal), (cu, text))
}

pub fn tree(label: &str, kernels: &[(serde_json::Value, String, String)]) -> Tree {
    tree_with(label, kernels, &[])
}

/// A tree of these kernels, with these other files (`.cu` files of [`with_cuda`]).
pub fn tree_with(label: &str, kernels: &[(serde_json::Value, String, String)], others: &[(String, String)]) -> Tree {
    let mut files = BTreeMap::new();
    let entries: Vec<_> = kernels.iter().map(|k| k.0.clone()).collect();
    files.insert("manifest.json".to_string(), serde_json::to_string_pretty(&json!({"generator": "kernelgen", "kernels": entries})).unwrap());
    for (_, path, metal) in kernels {
        files.insert(path.clone(), metal.clone());
    }
    files.extend(others.iter().cloned());
    Tree { label: label.into(), files }
}


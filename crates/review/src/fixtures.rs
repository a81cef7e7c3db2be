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

pub fn tree(label: &str, kernels: &[(serde_json::Value, String, String)]) -> Tree {
    let mut files = BTreeMap::new();
    let entries: Vec<_> = kernels.iter().map(|k| k.0.clone()).collect();
    files.insert("manifest.json".to_string(), serde_json::to_string_pretty(&json!({"generator": "kernelgen", "kernels": entries})).unwrap());
    for (_, path, metal) in kernels {
        files.insert(path.clone(), metal.clone());
    }
    Tree { label: label.into(), files }
}


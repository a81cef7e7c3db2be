//! A family's numpy reference (`[verify] reference = "refs/x.py:reference"`),
//! called once per kernel in a `python3` of its own.
//!
//! The function is called with keyword arguments: every array input by its
//! buffer name as a numpy array of its contract shape (bf16 as float32
//! holding the exact values: numpy has no bfloat16), every host-integer input
//! as an int32 array, every run-time size by its name as an int, and
//! `params`, the values the template is rendered with (axes, fields and
//! `let`s). It returns a dict of output name to array, a tuple in output
//! order, or the one output.

use crate::npy;
use kernelgen::contract::{Dtype, KernelDef, Source};
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::host::HostArray;
use kernelgen_emu::verify::Case;
use std::path::Path;
use std::process::Command;

const DRIVER: &str = include_str!("call_reference.py");

/// The reference's outputs as f64 values, in contract order, each checked
/// against the output's shape.
pub fn call(module: &Path, function: &str, r: &RenderedKernel, case: &Case) -> Result<Vec<Vec<f64>>, String> {
    let def: &KernelDef = &r.def;
    let what = format!("reference {}:{function}", module.display());
    let dir = tempfile::Builder::new().prefix("kernelgen-reference-").tempdir().map_err(|e| format!("{what}: a temporary folder: {e}"))?;
    let mut arrays = Vec::new();
    let mut host = Vec::new();
    let (mut a, mut h) = (case.arrays.iter(), case.host.iter());
    for b in def.inputs.iter() {
        match b.source {
            Source::Data => {
                let array: &HostArray = a.next().ok_or("fewer arrays than the contract's inputs")?;
                let file = format!("{}.npy", arrays.len());
                npy::write(&dir.path().join(&file), array)?;
                arrays.push(serde_json::json!([b.name.as_ref(), file, array.dtype == Dtype::Bf16]));
            }
            Source::HostInts => host.push(serde_json::json!([b.name.as_ref(), h.next().ok_or("fewer host integers than the contract's")?])),
            _ => {}
        }
    }
    let sizes: serde_json::Map<String, serde_json::Value> = def.sizes.iter().zip(&case.sizes).map(|(n, v)| (n.to_string(), serde_json::json!(v))).collect();
    let outputs: Vec<&str> = def.outputs.iter().map(|b| b.name.as_ref()).collect();
    let call = serde_json::json!({
        "module": module,
        "function": function,
        "arrays": arrays,
        "host": host,
        "sizes": sizes,
        "params": r.kernel.plan.params,
        "outputs": outputs,
    });
    std::fs::write(dir.path().join("call.json"), call.to_string()).map_err(|e| format!("{what}: {e}"))?;
    std::fs::write(dir.path().join("call_reference.py"), DRIVER).map_err(|e| format!("{what}: {e}"))?;
    let run = Command::new("python3")
        .arg(dir.path().join("call_reference.py"))
        .arg(dir.path())
        .output()
        .map_err(|e| format!("{what}: cannot run python3 ({e}); install Python 3 with numpy"))?;
    if !run.status.success() {
        let stderr = String::from_utf8_lossy(&run.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(format!("{what} failed ({}):\n{}", run.status, tail.join("\n")));
    }
    let shapes: Vec<Vec<u64>> = std::fs::read(dir.path().join("outputs.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| format!("{what}: the driver wrote no outputs"))?;
    let mut out = Vec::new();
    for (i, (b, shape)) in def.outputs.iter().zip(&shapes).enumerate() {
        let want = b.shape_at(&case.sizes).ok_or_else(|| format!("output `{}`: its shape overflows", b.name))?;
        let n: u64 = want.iter().product();
        let got: u64 = shape.iter().product();
        // A reference may return the same values in any shape of the same count only if it is the same shape, or flat.
        if *shape != want && !(shape.len() == 1 && got == n) {
            return Err(format!("{what}: output `{}` has shape {shape:?}, the kernel's is {want:?}", b.name));
        }
        let bytes = std::fs::read(dir.path().join(format!("out{i}.f64"))).map_err(|e| format!("{what}: output `{}`: {e}", b.name))?;
        out.push(bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect());
    }
    Ok(out)
}

//! A family's numpy reference (`[verify] reference = "refs/x.py:reference"`), called once per
//! kernel in a `python3` of its own. The file was found by
//! [`FamilyDef::python_reference`](kernelgen_codegen::family::FamilyDef::python_reference): a
//! regular file inside the family file's folder, reached through no symbolic link.
//!
//! The function is called with keyword arguments: every array input by its buffer name as a
//! numpy array of its contract shape (bf16 as float32 holding the exact values: numpy has no
//! bfloat16), every host-integer input as an int32 array, every run-time size by its name as
//! an int, and `params`, the values the template is rendered with (axes, fields and `let`s).
//! It returns a dict of output name to array, a tuple in output order, or the one output.

use crate::case::Case;
use crate::compare::Expected;
use crate::error::{Error, PythonFailure};
use kernelgen::contract::{Dtype, Tolerance};
use kernelgen::contract::Source;
use kernelgen_codegen::model::Params;
use kernelgen::contract::KernelDef;
use std::path::Path;
use std::process::Command;

const DRIVER: &str = include_str!("call_reference.py");

/// The reference's values of every output of `def`, by name, each checked against the
/// output's shape, to be compared within `tolerance`.
pub fn call(module: &Path, function: &str, def: &KernelDef, params: &Params, case: &Case, tolerance: Tolerance) -> Result<Vec<(String, Expected)>, Error> {
    let fail = |failure| Error::Python { reference: format!("reference {}:{function}", module.display()), failure };
    let io = |doing: &str| {
        let doing = doing.to_string();
        move |source| fail(PythonFailure::Io { doing, source })
    };
    let dir = tempfile::Builder::new().prefix("kernelgen-reference-").tempdir().map_err(io("a temporary folder"))?;
    let bound = case.bind(def)?;
    let mut arrays = Vec::new();
    for (i, (name, array)) in bound.names.iter().zip(&bound.arrays).enumerate() {
        let file = format!("{i}.bin");
        std::fs::write(dir.path().join(&file), &array.data[..]).map_err(io(&format!("input `{name}`")))?;
        // numpy has no bfloat16: its bits travel as uint16
        let numpy = if array.dtype == Dtype::Bf16 { Dtype::U16.numpy_name() } else { array.dtype.numpy_name() };
        arrays.push(serde_json::json!([name, file, numpy, array.shape, array.dtype == Dtype::Bf16]));
    }
    let host_names = def.inputs.iter().filter(|b| b.source == Source::HostInts).map(|b| b.name.as_ref());
    let host: Vec<serde_json::Value> = host_names.zip(&bound.host).map(|(name, values)| serde_json::json!([name, values])).collect();
    let sizes: serde_json::Map<String, serde_json::Value> = bound.sizes.iter().map(|(n, v)| (n.clone(), serde_json::json!(v))).collect();
    let outputs: Vec<&str> = def.outputs.iter().map(|b| b.name.as_ref()).collect();
    let call = serde_json::json!({
        "module": module,
        "function": function,
        "arrays": arrays,
        "host": host,
        "sizes": sizes,
        "params": params,
        "outputs": outputs,
    });
    std::fs::write(dir.path().join("call.json"), call.to_string()).map_err(io("call.json"))?;
    std::fs::write(dir.path().join("call_reference.py"), DRIVER).map_err(io("call_reference.py"))?;
    let run = Command::new("python3").arg(dir.path().join("call_reference.py")).arg(dir.path()).output().map_err(|e| fail(PythonFailure::NoPython(e)))?;
    if !run.status.success() {
        let stderr = String::from_utf8_lossy(&run.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(fail(PythonFailure::Failed { status: run.status.to_string(), stderr: tail.join("\n") }));
    }
    let shapes: Vec<Vec<u64>> = std::fs::read(dir.path().join("outputs.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| fail(PythonFailure::NoOutputs))?;
    let at: Vec<u64> = bound.sizes.iter().map(|(_, v)| *v).collect();
    let mut out = Vec::new();
    for (i, (b, shape)) in def.outputs.iter().zip(&shapes).enumerate() {
        let want = b.shape_at(&at).ok_or_else(|| Error::Input { input: b.name.to_string(), sizes: case.sizes_text(def), problem: crate::error::InputProblem::ShapeOverflows })?;
        let n: u64 = want.iter().product();
        let got: u64 = shape.iter().product();
        // the kernel's shape, or the same values flat
        if *shape != want && !(shape.len() == 1 && got == n) {
            return Err(fail(PythonFailure::Shape { output: b.name.to_string(), got: shape.clone(), want }));
        }
        let bytes = std::fs::read(dir.path().join(format!("out{i}.f64"))).map_err(io(&format!("output `{}`", b.name)))?;
        let values = bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        out.push((b.name.to_string(), Expected::Values { values, tolerance }));
    }
    Ok(out)
}

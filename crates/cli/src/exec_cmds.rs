//! `run` (one generated kernel on .npy inputs) and `emu` (any Metal file).

use crate::npy;
use kernelgen::backend::{self, Backend};
use kernelgen::contract::Source;
use kernelgen::launch::LaunchError;
use kernelgen::Dtype;
use kernelgen_emu::backend::{EmuBackend, OUTPUT_POISON};
use kernelgen_emu::{Binding, DeviceBuffer, EmuOptions, Emulator, HostArray};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `NAME=VALUE` pairs.
fn pairs<'a>(items: &'a [String], what: &str) -> Result<Vec<(&'a str, &'a str)>, String> {
    items
        .iter()
        .map(|s| s.split_once('=').ok_or_else(|| format!("error: {what} `{s}`: expected NAME=VALUE")))
        .collect()
}

fn create_out(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("error: {}: {e}", out.display()))
}

pub fn run(specs: &[PathBuf], kernel: &str, inputs: &[String], sizes: &[String], out: &Path) -> Result<ExitCode, String> {
    let generated = crate::codegen_cmds::run_pipeline(specs)?;
    let Some(rendered) = generated.kernels.iter().find(|r| r.kernel.name == kernel) else {
        let mut near: Vec<&str> = generated.kernels.iter().map(|r| r.kernel.name.as_str()).filter(|n| n.starts_with(kernel.split('_').next().unwrap_or(""))).collect();
        near.truncate(8);
        return Err(format!("error: no kernel `{kernel}` in the specs{}", if near.is_empty() { String::new() } else { format!("; kernels like it: {}", near.join(", ")) }));
    };
    let def = &rendered.def;
    let given = pairs(inputs, "--input")?;
    let takes = |name: &str| def.inputs.iter().any(|b| b.name == name && matches!(b.source, Source::Data | Source::HostInts));
    for (name, _) in &given {
        if !takes(name) {
            return Err(format!(
                "error: kernel `{kernel}` has no input `{name}`; its inputs are: {}",
                def.data_inputs().chain(def.host_inputs()).map(|b| b.name.as_ref()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let (mut arrays, mut host) = (Vec::new(), Vec::new());
    for b in def.inputs.iter().filter(|b| matches!(b.source, Source::Data | Source::HostInts)) {
        let Some((_, file)) = given.iter().find(|(n, _)| *n == b.name) else {
            return Err(format!("error: kernel `{kernel}`, argument `{}`: missing --input {}=FILE.npy ({})", b.name, b.name, b.dtype));
        };
        let array = npy::as_dtype(npy::read(Path::new(file)).map_err(|e| format!("error: {e}"))?, b.dtype);
        if b.source == Source::HostInts {
            host.push(npy::to_i32(&array).map_err(|e| format!("error: kernel `{kernel}`, argument `{}`: {e}", b.name))?);
        } else {
            arrays.push(array);
        }
    }
    let mut given_sizes = Vec::new();
    for (name, value) in pairs(sizes, "--size")? {
        let v: u64 = value.parse().map_err(|_| format!("error: --size {name}={value}: not a non-negative integer"))?;
        given_sizes.push((name.to_string(), v));
    }
    let emu = EmuBackend::with_defaults().map_err(|e| format!("error: {e}"))?;
    let refs: Vec<&HostArray> = arrays.iter().collect();
    let host_refs: Vec<&[i32]> = host.iter().map(Vec::as_slice).collect();
    let plan = backend::check(&emu, def, &refs, &host_refs, &given_sizes).map_err(|e| format!("error: {e}"))?;
    // SAFETY: `check` accepted exactly these arrays and made `plan`.
    let outputs = unsafe { emu.run(&plan, &refs) }.map_err(|e| format!("error: {}", LaunchError::backend(def, e)))?;
    create_out(out)?;
    for (b, a) in def.outputs.iter().zip(&outputs) {
        let path = out.join(format!("{}.npy", b.name));
        npy::write(&path, a).map_err(|e| format!("error: {e}"))?;
        println!("{}: {} {:?}{}", path.display(), b.dtype, a.shape, if b.dtype == Dtype::Bf16 { " (bfloat16 bits as uint16)" } else { "" });
    }
    Ok(ExitCode::SUCCESS)
}

fn triple(s: &str, what: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').collect();
    let parsed: Option<Vec<u32>> = parts.iter().map(|p| p.trim().parse().ok()).collect();
    match parsed {
        Some(v) if v.len() == 3 => Ok([v[0], v[1], v[2]]),
        _ => Err(format!("error: {what} `{s}`: expected three non-negative integers X,Y,Z")),
    }
}

pub struct EmuArgs<'a> {
    pub file: &'a Path,
    pub kernel: Option<&'a str>,
    pub grid: &'a str,
    pub threadgroup: &'a str,
    pub buffers: &'a [String],
    pub outputs: &'a [String],
    pub out: &'a Path,
    pub sanitize: bool,
}

pub fn emu(a: EmuArgs) -> Result<ExitCode, String> {
    if a.sanitize {
        kernelgen_emu::reexec_with_sanitizer_if_needed().map_err(|e| format!("error: cannot start under the sanitizer runtime: {e}"))?;
    }
    let grid = triple(a.grid, "--grid")?;
    let threadgroup = triple(a.threadgroup, "--threadgroup")?;
    let source = std::fs::read_to_string(a.file).map_err(|e| format!("error: {}: {e}", a.file.display()))?;
    let emulator = Emulator::new(EmuOptions { sanitize: a.sanitize, ..EmuOptions::default() }).map_err(|e| format!("error: {e}"))?;
    let program = emulator.load(&source, &a.file.display().to_string()).map_err(|e| format!("error: {e}"))?;
    let names: Vec<&str> = program.kernels().iter().map(|k| k.name.as_str()).collect();
    let sig = match a.kernel {
        Some(k) => program.kernel(k).ok_or_else(|| format!("error: no kernel `{k}` in {}; kernels: {}", a.file.display(), names.join(", ")))?,
        None => match program.kernels() {
            [one] => one,
            [] => return Err(format!("error: {} has no [[kernel]] function", a.file.display())),
            _ => return Err(format!("error: {} has several kernels; choose one with --kernel: {}", a.file.display(), names.join(", "))),
        },
    };
    let index = |s: &str, what: &str| -> Result<u32, String> { s.parse().map_err(|_| format!("error: {what} `{s}`: the buffer index must be an integer")) };
    let mut given: Vec<(u32, HostArray)> = Vec::new();
    for (i, file) in pairs(a.buffers, "--buffer")? {
        given.push((index(i, "--buffer")?, npy::read(Path::new(file)).map_err(|e| format!("error: {e}"))?));
    }
    let mut outputs: Vec<(u32, Dtype, Vec<u64>)> = Vec::new();
    for (i, spec) in pairs(a.outputs, "--output")? {
        let (dtype, shape) = spec.split_once(':').ok_or_else(|| format!("error: --output {i}={spec}: expected INDEX=DTYPE:SHAPE, e.g. 2=float32:4,128"))?;
        let dtype = Dtype::parse(dtype).ok_or_else(|| format!("error: --output {i}={spec}: unknown dtype `{dtype}` (float32, float16, bfloat16, int8, uint8, uint16, int32, uint32, bool or f32, f16, bf16)"))?;
        let shape: Option<Vec<u64>> = shape.split(',').map(|d| d.trim().parse().ok()).collect();
        let shape = shape.ok_or_else(|| format!("error: --output {i}={spec}: the shape must be comma-separated integers"))?;
        outputs.push((index(i, "--output")?, dtype, shape));
    }
    // Every buffer the kernel binds must be given exactly once, with the type it declares.
    let count = sig.buffer_count() as u32;
    let mut seen = Vec::new();
    for i in given.iter().map(|(i, _)| *i).chain(outputs.iter().map(|(i, _, _)| *i)) {
        if i >= count {
            return Err(format!("error: kernel `{}` binds buffers 0..{count}, not buffer({i})", sig.name));
        }
        if seen.contains(&i) {
            return Err(format!("error: buffer({i}) is given twice"));
        }
        seen.push(i);
    }
    let mut buffers: Vec<DeviceBuffer> = Vec::new();
    for slot in 0..count {
        let param = sig.params.iter().find(|p| p.binding == Binding::Buffer(slot));
        let label = param.map_or(format!("buffer({slot})"), |p| format!("buffer({slot}) `{}` ({})", p.name, p.type_name));
        let input = given.iter().find(|(i, _)| *i == slot);
        let output = outputs.iter().find(|(i, _, _)| *i == slot);
        let (dtype, bytes) = match (input, output) {
            (Some(_), Some(_)) => return Err(format!("error: {label} is given both as --buffer and as --output")),
            (None, None) => return Err(format!("error: kernel `{}`: {label} has no --buffer {slot}=FILE.npy or --output {slot}=DTYPE:SHAPE", sig.name)),
            (Some((_, arr)), None) => (arr.dtype, arr.data.to_vec()),
            (None, Some((_, dtype, shape))) => (*dtype, vec![OUTPUT_POISON; shape.iter().product::<u64>() as usize * dtype.size()]),
        };
        if let Some(p) = param {
            let declared = Dtype::ALL.into_iter().find(|d| d.metal_name() == p.type_name || (p.type_name == "half" && *d == Dtype::F16) || (p.type_name == "bfloat" && *d == Dtype::Bf16) || (p.type_name == "int" && *d == Dtype::I32) || (p.type_name == "uint" && *d == Dtype::U32));
            // A uint16 file stands for bf16 bits where the kernel declares bfloat16_t.
            let compatible = |d: Dtype| Some(d) == declared || (d == Dtype::U16 && declared == Some(Dtype::Bf16));
            if declared.is_some() && !compatible(dtype) {
                return Err(format!("error: kernel `{}`: {label} is declared {}, given {}", sig.name, p.type_name, dtype.numpy_name()));
            }
        }
        buffers.push(DeviceBuffer::from_bytes_aligned(&bytes, 16));
    }
    let mut refs: Vec<&mut DeviceBuffer> = buffers.iter_mut().collect();
    let stats = program.dispatch(&sig.name, &mut refs, grid, threadgroup).map_err(|e| format!("error: {e}"))?;
    create_out(a.out)?;
    for (i, dtype, shape) in &outputs {
        let name = sig.params.iter().find(|p| p.binding == Binding::Buffer(*i)).map_or(format!("buffer{i}"), |p| p.name.clone());
        let path = a.out.join(format!("{name}.npy"));
        npy::write(&path, &HostArray::new(*dtype, shape.clone(), buffers[*i as usize].as_bytes().to_vec())).map_err(|e| format!("error: {e}"))?;
        println!("{}: {} {:?}", path.display(), dtype.numpy_name(), shape);
    }
    println!("{}: {} threads in {} threadgroups, {:.3} s", sig.name, stats.threads, stats.threadgroups, stats.elapsed.as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

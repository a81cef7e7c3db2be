//! `run` (one generated kernel on .npy inputs) and `emu` (any Metal file).

use crate::error::Error;
use crate::npy::{self, FileDtype, NpyArray};
use crate::out::outln;
use kernelgen::backend::{self, Backend};
use kernelgen::contract::Source;
use kernelgen::launch::LaunchError;
use kernelgen::Dtype;
use kernelgen_emu::backend::{EmuBackend, OUTPUT_POISON};
use kernelgen_emu::{Binding, DeviceBuffer, EmuOptions, Emulator, FunctionConstant, HostArray, LoadOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `NAME=VALUE` pairs.
fn pairs<'a>(items: &'a [String], what: &str) -> Result<Vec<(&'a str, &'a str)>, Error> {
    items
        .iter()
        .map(|s| s.split_once('=').ok_or_else(|| Error::msg(format!("{what} `{s}`: expected NAME=VALUE"))))
        .collect()
}

/// Each NAME given once: `--size R=2 --size R=3` is a mistake, not the first.
fn once<'a>(items: Vec<(&'a str, &'a str)>, what: &str) -> Result<Vec<(&'a str, &'a str)>, Error> {
    for (i, (name, value)) in items.iter().enumerate() {
        if let Some((_, first)) = items[..i].iter().find(|(n, _)| n == name) {
            return Err(Error::msg(format!("{what} {name} is given twice ({name}={first} and {name}={value}); give it once")));
        }
    }
    Ok(items)
}

/// Checks, before anything runs, that `--out DIR` can be a directory: it is
/// one, or it does not exist and its nearest existing ancestor is one.
fn check_out(out: &Path) -> Result<(), Error> {
    let mut p = out;
    loop {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) if p == out => return Err(Error::msg(format!("--out {}: exists and is not a directory", out.display()))),
            Ok(_) => return Err(Error::msg(format!("--out {}: {} is not a directory", out.display(), p.display()))),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(format_args!("--out {}: {}", out.display(), p.display()), e)),
            Err(_) => match p.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => p = parent,
                _ => return Ok(()),
            },
        }
    }
}

fn create_out(out: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(out).map_err(|e| Error::io(out.display(), e))
}

/// Bytes of memory available to this process, where the system says.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn human(bytes: u128) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (bytes as f64, 0);
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} bytes") } else { format!("{v:.1} {}", units[u]) }
}

/// The byte size of an output buffer of `shape`, checked: no overflow, and
/// no more than the memory available (minus what is already claimed).
fn output_bytes(what: &str, dtype: FileDtype, shape: &[u64], claimed: u64) -> Result<u64, Error> {
    let elements: u128 = shape.iter().try_fold(1u128, |acc, d| acc.checked_mul(*d as u128)).unwrap_or(u128::MAX);
    let bytes = elements.saturating_mul(dtype.size() as u128);
    if bytes > usize::MAX as u128 / 2 || bytes > u64::MAX as u128 {
        return Err(Error::msg(format!("{what}: shape {shape:?} has {elements} elements ({} bytes), which no buffer can hold", bytes)));
    }
    let bytes = bytes as u64;
    if let Some(available) = available_memory() {
        // The buffer is held twice (host and device copies).
        let need = (bytes as u128 + claimed as u128) * 2;
        if need > available as u128 {
            return Err(Error::msg(format!(
                "{what}: {} for this output ({} with the other buffers, each held twice) is more than the {} of memory available",
                human(bytes as u128),
                human(need),
                human(available as u128)
            )));
        }
    }
    Ok(bytes)
}

pub fn run(specs: &crate::SpecArgs, kernel: &str, inputs: &[String], sizes: &[String], out: &Path) -> Result<ExitCode, Error> {
    let generated = crate::codegen_cmds::run_pipeline(specs)?;
    let Some(rendered) = generated.kernels.iter().find(|r| r.kernel.name == kernel) else {
        let mut near: Vec<&str> = generated.kernels.iter().map(|r| r.kernel.name.as_str()).filter(|n| n.starts_with(kernel.split('_').next().unwrap_or(""))).collect();
        near.truncate(8);
        return Err(Error::msg(format!("no kernel `{kernel}` in the specs{}", if near.is_empty() { String::new() } else { format!("; kernels like it: {}", near.join(", ")) })));
    };
    let def = &rendered.def;
    check_out(out)?;
    let given = once(pairs(inputs, "--input")?, "--input")?;
    let mut given_sizes = Vec::new();
    for (name, value) in once(pairs(sizes, "--size")?, "--size")? {
        let v: u64 = value.parse().map_err(|_| Error::msg(format!("--size {name}={value}: not a non-negative integer")))?;
        given_sizes.push((name.to_string(), v));
    }
    let takes = |name: &str| def.inputs.iter().any(|b| b.name == name && matches!(b.source, Source::Data | Source::HostInts));
    for (name, _) in &given {
        if !takes(name) {
            return Err(Error::msg(format!(
                "kernel `{kernel}` has no input `{name}`; its inputs are: {}",
                def.data_inputs().chain(def.host_inputs()).map(|b| b.name.as_ref()).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let (mut arrays, mut host) = (Vec::new(), Vec::new());
    for b in def.inputs.iter().filter(|b| matches!(b.source, Source::Data | Source::HostInts)) {
        let Some((_, file)) = given.iter().find(|(n, _)| *n == b.name) else {
            return Err(Error::msg(format!("kernel `{kernel}`, argument `{}`: missing --input {}=FILE.npy ({})", b.name, b.name, b.dtype)));
        };
        let array = npy::as_dtype(npy::read(Path::new(file)).map_err(Error::Message)?, b.dtype);
        if b.source == Source::HostInts {
            host.push(npy::to_i32(&array).map_err(|e| Error::msg(format!("kernel `{kernel}`, argument `{}`: {e}", b.name)))?);
        } else {
            arrays.push(array);
        }
    }
    let emu = EmuBackend::with_defaults()?;
    let refs: Vec<&HostArray> = arrays.iter().collect();
    let host_refs: Vec<&[i32]> = host.iter().map(Vec::as_slice).collect();
    let checked = backend::check(&emu, def, &refs, &host_refs, &given_sizes)?;
    let outputs = emu.run(&checked).map_err(|e| LaunchError::backend(def, e))?;
    create_out(out)?;
    for (b, a) in def.outputs.iter().zip(&outputs) {
        let path = out.join(format!("{}.npy", b.name));
        npy::write(&path, a).map_err(Error::Message)?;
        outln!("{}: {} {:?}{}", path.display(), b.dtype, a.shape, if b.dtype == Dtype::Bf16 { " (bfloat16 bits as uint16)" } else { "" });
    }
    Ok(ExitCode::SUCCESS)
}

fn triple(s: &str, what: &str) -> Result<[u32; 3], Error> {
    let parts: Vec<&str> = s.split(',').collect();
    let parsed: Option<Vec<u32>> = parts.iter().map(|p| p.trim().parse().ok()).collect();
    match parsed {
        Some(v) if v.len() == 3 => Ok([v[0], v[1], v[2]]),
        _ => Err(Error::msg(format!("{what} `{s}`: expected three non-negative integers X,Y,Z"))),
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
    /// `-I DIR`: searched for `#include` (e.g. MLX's `include/` for `mlx/backend/...`).
    pub include_dirs: &'a [PathBuf],
    /// `-D NAME[=VALUE]`.
    pub defines: &'a [String],
    /// `INDEX=VALUE` of `[[function_constant(INDEX)]]`.
    pub function_constants: &'a [String],
}

pub fn emu(a: EmuArgs) -> Result<ExitCode, Error> {
    if a.sanitize {
        kernelgen_emu::reexec_with_sanitizer_if_needed().map_err(|e| Error::io("cannot start under the sanitizer runtime", e))?;
    }
    check_out(a.out)?;
    let grid = triple(a.grid, "--grid")?;
    let threadgroup = triple(a.threadgroup, "--threadgroup")?;
    // Every size is checked before the kernel is compiled.
    let index = |s: &str, what: &str| -> Result<u32, Error> { s.parse().map_err(|_| Error::msg(format!("{what} `{s}`: the buffer index must be an integer"))) };
    let mut given: Vec<(u32, NpyArray)> = Vec::new();
    for (i, file) in pairs(a.buffers, "--buffer")? {
        given.push((index(i, "--buffer")?, npy::read_any(Path::new(file)).map_err(Error::Message)?));
    }
    let mut outputs: Vec<(u32, FileDtype, Vec<u64>, u64)> = Vec::new();
    for (i, spec) in pairs(a.outputs, "--output")? {
        let (dtype, shape) = spec.split_once(':').ok_or_else(|| Error::msg(format!("--output {i}={spec}: expected INDEX=DTYPE:SHAPE, e.g. 2=float32:4,128")))?;
        let dtype = FileDtype::parse(dtype).ok_or_else(|| Error::msg(format!("--output {i}={spec}: unknown dtype `{dtype}` (float32, float16, bfloat16, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool or f32, f16, bf16, i16, i64, u64)")))?;
        let shape: Option<Vec<u64>> = shape.split(',').map(|d| d.trim().parse().ok()).collect();
        let shape = shape.ok_or_else(|| Error::msg(format!("--output {i}={spec}: the shape must be comma-separated integers")))?;
        let claimed = outputs.iter().map(|(_, _, _, b)| *b).sum::<u64>() + given.iter().map(|(_, a)| a.data.len() as u64).sum::<u64>();
        let bytes = output_bytes(&format!("--output {i}={spec}"), dtype, &shape, claimed)?;
        outputs.push((index(i, "--output")?, dtype, shape, bytes));
    }
    let source = std::fs::read_to_string(a.file).map_err(|e| Error::io(a.file.display(), e))?;
    let mut load = LoadOptions { include_dirs: a.include_dirs.to_vec(), ..LoadOptions::default() };
    for d in a.defines {
        load.defines.push(crate::lint_cmd::parse_define(d)?);
    }
    for (i, v) in pairs(a.function_constants, "--function-constant")? {
        let index: u32 = i.parse().map_err(|_| Error::msg(format!("--function-constant {i}={v}: the index must be a non-negative integer")))?;
        let value = FunctionConstant::parse(v)
            .ok_or_else(|| Error::msg(format!("--function-constant {i}={v}: the value must be true, false, an integer or a float")))?;
        load.function_constants.push((index, value));
    }
    let emulator = Emulator::new(EmuOptions { sanitize: a.sanitize, ..EmuOptions::default() })?;
    let program = emulator.load_with(&source, &a.file.display().to_string(), &load)?;
    let names: Vec<&str> = program.kernels().iter().map(|k| k.name.as_str()).collect();
    let sig = match a.kernel {
        Some(k) => program.kernel(k).ok_or_else(|| Error::msg(format!("no kernel `{k}` in {}; kernels: {}", a.file.display(), names.join(", "))))?,
        None => match program.kernels() {
            [one] => one,
            [] => return Err(Error::msg(format!("{} has no [[kernel]] function", a.file.display()))),
            _ => return Err(Error::msg(format!("{} has several kernels; choose one with --kernel: {}", a.file.display(), names.join(", ")))),
        },
    };
    // Every buffer the kernel binds must be given exactly once, with the type it declares.
    let count = sig.buffer_count() as u32;
    let mut seen = Vec::new();
    for i in given.iter().map(|(i, _)| *i).chain(outputs.iter().map(|(i, _, _, _)| *i)) {
        if i >= count {
            return Err(Error::msg(format!("kernel `{}` binds buffers 0..{count}, not buffer({i})", sig.name)));
        }
        if seen.contains(&i) {
            return Err(Error::msg(format!("buffer({i}) is given twice")));
        }
        seen.push(i);
    }
    let mut buffers: Vec<DeviceBuffer> = Vec::new();
    for slot in 0..count {
        let param = sig.params.iter().find(|p| p.binding == Binding::Buffer(slot));
        let label = param.map_or(format!("buffer({slot})"), |p| format!("buffer({slot}) `{}` ({})", p.name, p.type_name));
        let input = given.iter().find(|(i, _)| *i == slot);
        let output = outputs.iter().find(|(i, _, _, _)| *i == slot);
        let (dtype, bytes) = match (input, output) {
            (Some(_), Some(_)) => return Err(Error::msg(format!("{label} is given both as --buffer and as --output"))),
            (None, None) => return Err(Error::msg(format!("kernel `{}`: {label} has no --buffer {slot}=FILE.npy or --output {slot}=DTYPE:SHAPE", sig.name))),
            (Some((_, arr)), None) => (arr.dtype, arr.data.clone()),
            (None, Some((_, dtype, _, bytes))) => {
                let mut poisoned = Vec::new();
                poisoned.try_reserve_exact(*bytes as usize).map_err(|e| Error::msg(format!("{label}: cannot allocate {}: {e}", human(*bytes as u128))))?;
                poisoned.resize(*bytes as usize, OUTPUT_POISON);
                (*dtype, poisoned)
            }
        };
        if let Some(p) = param {
            let declared = FileDtype::of_metal_type(&p.type_name);
            // A uint16 file stands for bf16 bits where the kernel declares bfloat16_t.
            let bf16 = Some(FileDtype::Contract(Dtype::Bf16));
            let compatible = |d: FileDtype| Some(d) == declared || (d == FileDtype::Contract(Dtype::U16) && declared == bf16);
            if declared.is_some() && !compatible(dtype) {
                return Err(Error::msg(format!("kernel `{}`: {label} is declared {}, given {}", sig.name, p.type_name, dtype.numpy_name())));
            }
        }
        buffers.push(DeviceBuffer::try_from_bytes_on(&bytes, 16, 1).map_err(|e| Error::emu(label, e))?);
    }
    let mut refs: Vec<&mut DeviceBuffer> = buffers.iter_mut().collect();
    let stats = program.dispatch(&sig.name, &mut refs, grid, threadgroup)?;
    create_out(a.out)?;
    for (i, dtype, shape, _) in &outputs {
        let name = sig.params.iter().find(|p| p.binding == Binding::Buffer(*i)).map_or(format!("buffer{i}"), |p| p.name.clone());
        let path = a.out.join(format!("{name}.npy"));
        let array = NpyArray { dtype: *dtype, shape: shape.clone(), data: buffers[*i as usize].as_bytes().to_vec() };
        npy::write_any(&path, &array).map_err(Error::Message)?;
        outln!("{}: {} {:?}", path.display(), dtype.numpy_name(), shape);
    }
    outln!("{}: {} threads in {} threadgroups, {:.3} s", sig.name, stats.threads, stats.threadgroups, stats.elapsed.as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

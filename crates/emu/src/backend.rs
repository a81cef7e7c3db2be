//! The emulator backend: runs a generated kernel's `.metal` on the CPU, every buffer between
//! `PROT_NONE` guard regions (see [`DeviceBuffer`]), poisoned gaps between the declared
//! regions of packed buffers, and outputs filled with poison so an element the kernel fails
//! to write shows up. Each buffer is aligned to what its kernel relies on (its contract's
//! `align`), so its end sits flush against the guard: one element past the end faults.
//!
//! Inputs are read-only while the kernel runs (a write faults, naming the buffer). An input
//! whose bytes are in guarded memory ([`crate::HostData`]: [`HostArray::zeros`] of 16 MiB or
//! more, [`HostArray::guarded`], every large output of a launch) is bound in place when its
//! start is aligned as the contract needs and it declares no regions: a launch then copies
//! nothing. Any other input is copied once into a device buffer (on the launch's workers
//! when it is large). Outputs of 16 MiB or more move into their arrays without a copy.

use crate::host::{GUARDED_MIN_BYTES, HostData};
use crate::runtime::Buf;
use crate::{DeviceBuffer, Dispatch, DispatchStats, EmuError, EmuOptions, Emulator, HostArray, Language, LoadOptions, MemoryCheck, POISON, Placement, Program, RunOrder};
use kernelgen::backend::{Backend, Checked};
use kernelgen::contract::KernelDef;
use kernelgen::launch::{ArgInfo, Input};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The byte outputs are filled with before a launch (0xFF reads as NaN).
pub const OUTPUT_POISON: u8 = 0xFF;

/// How one launch runs: the emulator's defaults for [`Backend::run`], other
/// run orders and poison bytes for [`EmuBackend::run_with`] (what
/// `kernelgen-verify` varies to find races, unwritten outputs and reads of
/// uninitialized memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// The order threads and threadgroups run in.
    pub order: RunOrder,
    /// The byte outputs are filled with before the launch.
    pub output_poison: u8,
    /// The byte threadgroup memory is filled with before each threadgroup.
    pub threadgroup_poison: u8,
    /// Where the buffers' data sits in their pages (see [`Placement`]).
    pub placement: Placement,
    /// The threadgroup-memory check, if any ([`Dispatch::memory_check`]).
    pub memory_check: Option<MemoryCheck>,
}

/// Runs generated kernels in the emulator: each kernel's Metal body, or, for a backend made
/// by [`EmuBackend::with_language`]`(Language::Cuda)`, its CUDA body ([`KernelDef::cuda`]),
/// launched as MLX's `cuda_kernel` launches it (whole blocks, its dynamic shared memory).
pub struct EmuBackend {
    emulator: Arc<Emulator>,
    /// Each kernel's body is built (or taken from the on-disk cache) once, keyed by name
    /// and language and checked against its source; shared by the backends of one emulator.
    programs: Arc<Mutex<HashMap<(String, Language), (String, Program)>>>,
    /// The body it launches.
    language: Language,
}

impl EmuBackend {
    /// A backend over a new [`Emulator`] with these options, launching the Metal bodies.
    pub fn new(options: EmuOptions) -> Result<Self, EmuError> {
        Ok(EmuBackend { emulator: Arc::new(Emulator::new(options)?), programs: Arc::default(), language: Language::Metal })
    }

    /// A backend over the same emulator (and the programs it built) that launches each
    /// kernel's body in `language`: the CUDA body for [`Language::Cuda`] (a kernel without
    /// one is refused, naming it). The launch checks and the launch plan are the same.
    pub fn with_language(&self, language: Language) -> EmuBackend {
        EmuBackend { emulator: Arc::clone(&self.emulator), programs: Arc::clone(&self.programs), language }
    }

    /// The language of the bodies it launches.
    pub fn language(&self) -> Language {
        self.language
    }

    /// An emulator with default options (cache under the build directory).
    pub fn with_defaults() -> Result<Self, EmuError> {
        Self::new(EmuOptions::default())
    }

    /// The emulator it runs kernels in.
    pub fn emulator(&self) -> &Emulator {
        &self.emulator
    }

    /// The loaded program of `def`'s body in this backend's language, compiled on first use.
    pub fn program(&self, def: &KernelDef) -> Result<Program, EmuError> {
        let (source, path) = self.body(def)?;
        let key = (def.name.to_string(), self.language);
        let mut programs = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((loaded, p)) = programs.get(&key) {
            if loaded == source {
                return Ok(p.clone());
            }
        }
        let p = self.emulator.load_with(source, path, &LoadOptions { language: self.language, ..LoadOptions::default() })?;
        programs.insert(key, (source.to_string(), p.clone()));
        Ok(p)
    }

    /// `def`'s source and path in this backend's language.
    fn body<'d>(&self, def: &'d KernelDef) -> Result<(&'d str, &'d str), EmuError> {
        match (self.language, &def.cuda) {
            (Language::Cuda, Some(cuda)) => Ok((&cuda.source, &cuda.path)),
            (Language::Cuda, None) => Err(EmuError::Launch {
                kernel: def.name.to_string(),
                message: "it has no CUDA body (its family has no CUDA template): it runs on Metal only".into(),
            }),
            _ => Ok((&def.metal, &def.metal_path)),
        }
    }

    /// Per input of `def`, the values of the parameters MLX's CUDA launch passes after it
    /// where the source declares them (`x_shape`, `x_strides`, `x_ndim`: `Shape` and `Strides`
    /// arrays of `MAX_NDIM`, zero past the input's dimensions, and an `int`); none on Metal.
    fn shape_parameters(&self, def: &KernelDef, program: &Program, inputs: &[Input], arrays: &[&HostArray], at_start: bool) -> Result<Vec<Vec<DeviceBuffer>>, EmuError> {
        let (function, _, _) = self.entry(def, def.threadgroup);
        let declared = |name: &str| program.kernel(function).is_some_and(|k| k.params.iter().any(|p| p.name == name));
        let mut all = Vec::with_capacity(def.inputs.len());
        for (b, input) in def.inputs.iter().zip(inputs) {
            let mut these = Vec::new();
            if self.language == Language::Cuda && !b.shape.is_empty() {
                let shape: &[u64] = match input {
                    Input::Array(i) => &arrays[*i].shape,
                    Input::Values(v) => &v.shape,
                    _ => &[],
                };
                for (suffix, _) in kernelgen_cuda::mlx::SHAPE_PARAMETERS {
                    if !declared(&format!("{}{suffix}", b.name)) {
                        continue;
                    }
                    let bytes = cuda_shape_parameter(suffix, shape).ok_or_else(|| EmuError::Launch {
                        kernel: def.name.to_string(),
                        message: format!("input `{}` of shape {shape:?} does not fit MLX's `{}{suffix}` (at most {} dimensions of int32)", b.name, b.name, kernelgen_cuda::mlx::MAX_NDIM),
                    })?;
                    these.push(DeviceBuffer::try_from_bytes_placed(&bytes, 8, 1, at_start)?);
                }
            }
            all.push(these);
        }
        Ok(all)
    }

    /// The function a launch of `def` calls, its threads in a threadgroup (a CUDA body's
    /// block may differ from the Metal threadgroup) and the dynamic shared memory it reserves.
    fn entry<'d>(&self, def: &'d KernelDef, threadgroup: [u32; 3]) -> (&'d str, [u32; 3], u32) {
        match (self.language, &def.cuda) {
            (Language::Cuda, Some(cuda)) => (&cuda.mlx_name, cuda.threadgroup, cuda.shared_memory_bytes),
            _ => (&def.mlx_name, threadgroup, 0),
        }
    }
}

impl Backend for EmuBackend {
    type Array = HostArray;
    type Error = EmuError;

    fn describe(&self, a: &HostArray) -> ArgInfo {
        // Host arrays are dense and row-major by construction; the emulator binds a guarded
        // one in place only when it is aligned as the kernel needs (else it copies it into
        // an aligned device buffer), so no address is given.
        ArgInfo { dtype: Ok(a.dtype), shape: a.shape.clone(), bytes: a.data.len() as u64, row_contiguous: true, address: None }
    }

    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<HostArray>, EmuError> {
        let opts = self.emulator.options();
        let config = RunConfig { order: opts.order, output_poison: OUTPUT_POISON, threadgroup_poison: POISON, placement: opts.placement, memory_check: None };
        self.run_with(launch, config)
    }
}

impl EmuBackend {
    /// [`Backend::run`] in another run order or with other poison bytes.
    pub fn run_with(&self, launch: &Checked<'_, Self>, config: RunConfig) -> Result<Vec<HostArray>, EmuError> {
        self.run_with_stats(launch, config).map(|(outputs, _)| outputs)
    }

    /// [`EmuBackend::run_with`], and the dispatch's counters (the threadgroup memory its
    /// threadgroups allocated among them).
    pub fn run_with_stats(&self, launch: &Checked<'_, Self>, config: RunConfig) -> Result<(Vec<HostArray>, DispatchStats), EmuError> {
        let (plan, arrays) = (launch.plan(), launch.arrays());
        let def = plan.def();
        let program = self.program(def)?;
        let opts = self.emulator.options();
        let workers = crate::workers_or_default(opts.workers);
        // a start-placed launch makes its buffers so (the dispatch would move them)
        let at_start = config.placement == Placement::Start;
        // Inputs are read-only while the kernel runs (a write faults). An array in guarded
        // memory is bound in place when the kernel needs nothing more of it; every other
        // input is copied once into a device buffer (declared regions get their poisoned gaps).
        let mut copies: Vec<Option<DeviceBuffer>> = Vec::with_capacity(def.inputs.len());
        let mut in_place: Vec<Option<&DeviceBuffer>> = Vec::with_capacity(def.inputs.len());
        for (b, input) in def.inputs.iter().zip(plan.inputs()) {
            let align = b.align as usize;
            let bytes: &[u8] = match input {
                Input::Array(i) => {
                    let data = &arrays[*i].data;
                    let usable = data.device().filter(|d| {
                        b.regions.is_empty() && opts.guard_pages && d.align() >= align && d.data_ptr() as usize % align.max(1) == 0
                    });
                    if let Some(d) = usable {
                        copies.push(None);
                        in_place.push(Some(d));
                        continue;
                    }
                    data
                }
                Input::Values(v) => &v.to_le_bytes(),
                other => {
                    return Err(EmuError::Launch {
                        kernel: def.name.to_string(),
                        message: format!("input `{}` comes from {other:?}, which this emulator does not know how to bind (a newer kernelgen?)", b.name),
                    })
                }
            };
            let mut buf = DeviceBuffer::try_from_bytes_placed(bytes, align, workers, at_start)?;
            if !b.regions.is_empty() {
                // (each packed buffer of an array of them has its regions, and its gaps poisoned)
                let regions: Vec<std::ops::Range<usize>> = b.region_ranges(bytes.len() as u64).into_iter().map(|r| r.start as usize..r.end as usize).collect();
                buf.set_regions(&regions);
            }
            copies.push(Some(buf));
            in_place.push(None);
        }
        let mut shapes = self.shape_parameters(def, &program, plan.inputs(), arrays, at_start)?;
        let mut outputs: Vec<DeviceBuffer> = Vec::with_capacity(def.outputs.len());
        for (b, o) in def.outputs.iter().zip(plan.outputs()) {
            outputs.push(DeviceBuffer::try_filled_placed(o.bytes as usize, b.align as usize, config.output_poison, at_start)?);
        }
        let stats = {
            let mut bufs: Vec<Buf<'_>> = Vec::with_capacity(copies.len() + outputs.len());
            for ((copy, shared), shape) in copies.iter_mut().zip(&in_place).zip(&mut shapes) {
                bufs.push(match (copy, shared) {
                    (Some(c), _) => Buf::ReadOnly(c),
                    (None, Some(d)) => Buf::Shared(d),
                    (None, None) => unreachable!("every input is bound"),
                });
                bufs.extend(shape.iter_mut().map(Buf::ReadOnly));
            }
            bufs.extend(outputs.iter_mut().map(Buf::Mut));
            let (function, threadgroup, shared_memory) = self.entry(def, plan.threadgroup());
            let dispatch = Dispatch::new(function, plan.grid(), threadgroup)
                .order(config.order)
                .placement(config.placement)
                .threadgroup_poison(config.threadgroup_poison)
                .memory_check(config.memory_check)
                .shared_memory(shared_memory);
            program.run_bufs(&dispatch, &mut bufs)?
        };
        drop(copies);
        // a large output moves into the array as it is (guarded, bound in place by the next launch)
        let outputs = plan
            .outputs()
            .iter()
            .zip(outputs)
            .map(|(o, mut buf)| {
                let data = if buf.len() >= GUARDED_MIN_BYTES {
                    // end-placed, as every buffer outside a dispatch is (a shared input is never moved)
                    buf.move_data(false);
                    HostData::from_device(buf)
                } else {
                    buf.as_bytes().to_vec().into()
                };
                HostArray::with_data(o.dtype, o.shape.clone(), data)
            })
            .collect();
        Ok((outputs, stats))
    }
}

/// The bytes of MLX's CUDA parameter `<input><suffix>` for a row-contiguous input of `shape`
/// (`ensure_row_contiguous`): `None` where the shape does not fit it.
fn cuda_shape_parameter(suffix: &str, shape: &[u64]) -> Option<Vec<u8>> {
    use kernelgen_cuda::mlx::MAX_NDIM;
    if shape.len() > MAX_NDIM {
        return None;
    }
    let mut bytes = Vec::new();
    match suffix {
        "_shape" => {
            for k in 0..MAX_NDIM {
                bytes.extend(i32::try_from(shape.get(k).copied().unwrap_or(0)).ok()?.to_le_bytes());
            }
        }
        "_strides" => {
            let mut strides = vec![0i64; MAX_NDIM];
            let mut stride = 1i64;
            for k in (0..shape.len()).rev() {
                strides[k] = stride;
                stride = stride.checked_mul(i64::try_from(shape[k]).ok()?)?;
            }
            strides.iter().for_each(|s| bytes.extend(s.to_le_bytes()));
        }
        _ => bytes.extend((shape.len() as i32).to_le_bytes()),
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stand-in's `Shape` and `Strides` are as long as the bytes bound to them.
    #[test]
    fn shape_parameters_are_as_long_as_the_stand_ins_arrays() {
        use kernelgen_cuda::mlx::MAX_NDIM;
        assert!(include_str!("shim/kgemu_cuda.h").contains(&format!("#define MAX_NDIM {MAX_NDIM}\n")));
        let shape = cuda_shape_parameter("_shape", &[3, 64]).unwrap();
        assert_eq!((shape.len(), &shape[..8]), (4 * MAX_NDIM, &[3, 0, 0, 0, 64, 0, 0, 0][..]));
        let strides = cuda_shape_parameter("_strides", &[3, 64]).unwrap();
        assert_eq!((strides.len(), &strides[..16]), (8 * MAX_NDIM, &[64, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0][..]));
        assert_eq!(cuda_shape_parameter("_ndim", &[3, 64]).unwrap(), 2i32.to_le_bytes());
        assert_eq!(cuda_shape_parameter("_shape", &[1; 11]), None);
        assert_eq!(cuda_shape_parameter("_shape", &[1 << 31]), None);
    }
}

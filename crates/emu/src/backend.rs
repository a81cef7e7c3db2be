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
use crate::{DeviceBuffer, Dispatch, EmuError, EmuOptions, Emulator, HostArray, POISON, Placement, Program, RunOrder};
use kernelgen::backend::{Backend, Checked};
use kernelgen::contract::KernelDef;
use kernelgen::launch::{ArgInfo, Input};
use std::collections::HashMap;
use std::sync::Mutex;

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
}

/// Runs generated kernels in the MSL emulator.
pub struct EmuBackend {
    emulator: Emulator,
    /// Each kernel is built (or taken from the on-disk cache) once, keyed by
    /// name and checked against its source.
    programs: Mutex<HashMap<String, (String, Program)>>,
}

impl EmuBackend {
    /// A backend over a new [`Emulator`] with these options.
    pub fn new(options: EmuOptions) -> Result<Self, EmuError> {
        Ok(EmuBackend { emulator: Emulator::new(options)?, programs: Mutex::new(HashMap::new()) })
    }

    /// An emulator with default options (cache under the build directory).
    pub fn with_defaults() -> Result<Self, EmuError> {
        Self::new(EmuOptions::default())
    }

    /// The emulator it runs kernels in.
    pub fn emulator(&self) -> &Emulator {
        &self.emulator
    }

    /// The loaded program of `def`, compiled on first use.
    pub fn program(&self, def: &KernelDef) -> Result<Program, EmuError> {
        let mut programs = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((metal, p)) = programs.get(def.name.as_ref()) {
            if *metal == *def.metal {
                return Ok(p.clone());
            }
        }
        let p = self.emulator.load(&def.metal, &def.metal_path)?;
        programs.insert(def.name.to_string(), (def.metal.to_string(), p.clone()));
        Ok(p)
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
        let config = RunConfig { order: opts.order, output_poison: OUTPUT_POISON, threadgroup_poison: POISON, placement: opts.placement };
        self.run_with(launch, config)
    }
}

impl EmuBackend {
    /// [`Backend::run`] in another run order or with other poison bytes.
    pub fn run_with(&self, launch: &Checked<'_, Self>, config: RunConfig) -> Result<Vec<HostArray>, EmuError> {
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
                let regions: Vec<std::ops::Range<usize>> = b.regions.iter().map(|r| r.offset as usize..(r.offset + r.bytes) as usize).collect();
                buf.set_regions(&regions);
            }
            copies.push(Some(buf));
            in_place.push(None);
        }
        let mut outputs: Vec<DeviceBuffer> = Vec::with_capacity(def.outputs.len());
        for (b, o) in def.outputs.iter().zip(plan.outputs()) {
            outputs.push(DeviceBuffer::try_filled_placed(o.bytes as usize, b.align as usize, config.output_poison, at_start)?);
        }
        {
            let mut bufs: Vec<Buf<'_>> = Vec::with_capacity(copies.len() + outputs.len());
            for (copy, shared) in copies.iter_mut().zip(&in_place) {
                bufs.push(match (copy, shared) {
                    (Some(c), _) => Buf::ReadOnly(c),
                    (None, Some(d)) => Buf::Shared(d),
                    (None, None) => unreachable!("every input is bound"),
                });
            }
            bufs.extend(outputs.iter_mut().map(Buf::Mut));
            let dispatch = Dispatch::new(&def.mlx_name, plan.grid(), plan.threadgroup())
                .order(config.order)
                .placement(config.placement)
                .threadgroup_poison(config.threadgroup_poison);
            program.run_bufs(&dispatch, &mut bufs)?;
        }
        drop(copies);
        // a large output moves into the array as it is (guarded, bound in place by the next launch)
        Ok(plan
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
            .collect())
    }
}

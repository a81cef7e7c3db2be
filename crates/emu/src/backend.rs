//! The emulator backend: runs a generated kernel's `.metal` on the CPU
//! (`crate::emu`), with guard pages after every buffer, poisoned gaps
//! between the declared regions of packed buffers, and outputs filled with
//! poison so an element the kernel fails to write shows up. Each buffer is
//! aligned to what its kernel relies on (its contract's `align`), so its end
//! sits flush against the guard page: one element past the end faults.

use kernelgen::backend::Backend;
use kernelgen::contract::{Dtype, KernelDef, Source};
use crate::{DeviceBuffer, EmuError, EmuOptions, Emulator, Program};
use crate::host::HostArray;
use kernelgen::launch::{ArgInfo, LaunchError, size_value_bytes};
use std::collections::HashMap;
use std::sync::Mutex;

/// The byte outputs are filled with before a launch (0xFF reads as NaN).
pub const OUTPUT_POISON: u8 = 0xFF;

pub struct EmuBackend {
    emulator: Emulator,
    /// Each kernel is built (or taken from the on-disk cache) once.
    programs: Mutex<HashMap<&'static str, Program>>,
}

impl EmuBackend {
    pub fn new(options: EmuOptions) -> Result<Self, EmuError> {
        Ok(EmuBackend {
            emulator: Emulator::new(options)?,
            programs: Mutex::new(HashMap::new()),
        })
    }

    /// An emulator with default options (cache under the build directory).
    pub fn with_defaults() -> Result<Self, EmuError> {
        Self::new(EmuOptions::default())
    }

    pub fn emulator(&self) -> &Emulator {
        &self.emulator
    }

    /// The loaded program of `def`, compiled on first use.
    pub fn program(&self, def: &'static KernelDef) -> Result<Program, EmuError> {
        let mut programs = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = programs.get(def.name) {
            return Ok(p.clone());
        }
        let p = self.emulator.load(def.metal, def.metal_path)?;
        programs.insert(def.name, p.clone());
        Ok(p)
    }
}

impl Backend for EmuBackend {
    type Array = HostArray;

    fn describe(&self, a: &HostArray) -> ArgInfo {
        // Host arrays are dense and row-major by construction; the emulator
        // copies them into aligned device buffers, so no address is given.
        ArgInfo {
            dtype: a.dtype,
            shape: a.shape.clone(),
            bytes: a.data.len() as u64,
            row_contiguous: true,
            address: None,
            unsupported_dtype: None,
        }
    }

    fn read_ints(&self, a: &HostArray) -> Option<Vec<i64>> {
        let d = &a.data;
        Some(match a.dtype {
            Dtype::I32 => d.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
            Dtype::U32 => d.chunks_exact(4).map(|c| i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
            Dtype::U16 => d.chunks_exact(2).map(|c| i64::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
            Dtype::I8 => d.iter().map(|&b| i64::from(b as i8)).collect(),
            Dtype::U8 | Dtype::Bool => d.iter().map(|&b| i64::from(b)).collect(),
            Dtype::F32 | Dtype::F16 | Dtype::Bf16 => return None,
        })
    }

    unsafe fn run_unchecked(
        &self,
        def: &'static KernelDef,
        inputs: &[&HostArray],
        sizes: &[u64],
    ) -> Result<Vec<HostArray>, LaunchError> {
        let failed = |e: EmuError| LaunchError::backend(def, e.to_string());
        let program = self.program(def).map_err(failed)?;
        let mut given = inputs.iter();
        let mut buffers: Vec<DeviceBuffer> =
            Vec::with_capacity(def.inputs.len() + def.outputs.len());
        for b in def.inputs {
            let bytes = match b.source {
                Source::Data => given
                    .next()
                    .expect("checked: one array per data input")
                    .data
                    .clone(),
                Source::SizeValue(_) => size_value_bytes(def, b, sizes),
            };
            let mut buf = DeviceBuffer::from_bytes_aligned(&bytes, b.align as usize);
            if !b.regions.is_empty() {
                let regions: Vec<std::ops::Range<usize>> = b
                    .regions
                    .iter()
                    .map(|r| r.offset as usize..(r.offset + r.bytes) as usize)
                    .collect();
                buf.set_regions(&regions);
            }
            buffers.push(buf);
        }
        for b in def.outputs {
            let elements = b.elements(sizes).expect("checked: outputs fit");
            let bytes = vec![OUTPUT_POISON; elements as usize * b.dtype.size()];
            buffers.push(DeviceBuffer::from_bytes_aligned(&bytes, b.align as usize));
        }
        let grid = def.grid_at(sizes).expect("checked: the grid fits");
        let grid = [grid[0] as u32, grid[1] as u32, grid[2] as u32];
        let mut refs: Vec<&mut DeviceBuffer> = buffers.iter_mut().collect();
        program
            .dispatch(def.mlx_name, &mut refs, grid, def.threadgroup)
            .map_err(failed)?;
        let outputs = buffers.split_off(def.inputs.len());
        Ok(def
            .outputs
            .iter()
            .zip(outputs)
            .map(|(b, buf)| {
                HostArray::new(
                    b.dtype,
                    b.shape_at(sizes).expect("checked"),
                    buf.as_bytes().to_vec(),
                )
            })
            .collect())
    }
}

//! The inputs of one verification launch, by buffer name, and random ones drawn from a
//! kernel's contract.

use crate::error::{CaseProblem, Error, InputProblem};
use half::{bf16, f16};
use kernelgen::contract::{Dtype, Format, KernelDef, Region, Source};
use kernelgen_codegen::family::InputValues;
use kernelgen_emu::HostArray;
use kernelgen_reference::SplitMix64;
use std::collections::BTreeMap;

/// The inputs of one verification launch: array and host-integer inputs by buffer name, and
/// the run-time sizes by name (a launch checks them against the shapes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Case {
    /// The run-time sizes.
    pub sizes: BTreeMap<String, u64>,
    /// The array inputs.
    pub arrays: BTreeMap<String, HostArray>,
    /// The host-integer inputs (`host = true`).
    pub host: BTreeMap<String, Vec<i32>>,
}

impl Case {
    /// A case with no inputs yet.
    pub fn new() -> Self {
        Case::default()
    }

    /// With the run-time size `name`.
    pub fn size(mut self, name: &str, value: u64) -> Self {
        self.sizes.insert(name.to_string(), value);
        self
    }

    /// With the array input `name`.
    pub fn array(mut self, name: &str, array: HostArray) -> Self {
        self.arrays.insert(name.to_string(), array);
        self
    }

    /// With the host-integer input `name`.
    pub fn host_ints(mut self, name: &str, values: Vec<i32>) -> Self {
        self.host.insert(name.to_string(), values);
        self
    }

    /// The array input `name`.
    pub fn get(&self, name: &str) -> Result<&HostArray, Error> {
        self.arrays.get(name).ok_or_else(|| CaseProblem::MissingInput(name.to_string()).into())
    }

    /// The host-integer input `name`.
    pub fn get_host(&self, name: &str) -> Result<&[i32], Error> {
        self.host.get(name).map(Vec::as_slice).ok_or_else(|| CaseProblem::MissingInput(name.to_string()).into())
    }

    /// The sizes in `def`'s order, `M=2,T=3` (`-` for none), as the report shows them.
    pub fn sizes_text(&self, def: &KernelDef) -> String {
        let text: Vec<String> = def.sizes.iter().filter_map(|n| self.sizes.get(n.as_ref()).map(|v| format!("{n}={v}"))).collect();
        if text.is_empty() { "-".into() } else { text.join(",") }
    }

    /// The inputs in `def`'s contract order, as a launch takes them: every input and size the
    /// contract has, and nothing else.
    pub fn bind<'c>(&'c self, def: &KernelDef) -> Result<Bound<'c>, Error> {
        let mut bound = Bound { arrays: Vec::new(), names: Vec::new(), host: Vec::new(), sizes: Vec::new() };
        for b in def.inputs.iter() {
            match b.source {
                Source::Data => {
                    bound.arrays.push(self.get(&b.name)?);
                    bound.names.push(b.name.to_string());
                }
                Source::HostInts => bound.host.push(self.get_host(&b.name)?),
                _ => {}
            }
        }
        let takes = |name: &str, source: Source| def.inputs.iter().any(|b| b.name.as_ref() == name && b.source == source);
        if let Some(name) = self.arrays.keys().find(|n| !takes(n, Source::Data)).or_else(|| self.host.keys().find(|n| !takes(n, Source::HostInts))) {
            return Err(CaseProblem::UnknownInput(name.clone()).into());
        }
        for name in def.sizes.iter() {
            let value = self.sizes.get(name.as_ref()).ok_or_else(|| CaseProblem::MissingSize(name.to_string()))?;
            bound.sizes.push((name.to_string(), *value));
        }
        if let Some(name) = self.sizes.keys().find(|n| !def.sizes.iter().any(|s| s.as_ref() == n.as_str())) {
            return Err(CaseProblem::UnknownSize(name.clone()).into());
        }
        Ok(bound)
    }
}

/// A [`Case`] in a kernel's contract order.
pub struct Bound<'c> {
    /// The array inputs.
    pub arrays: Vec<&'c HostArray>,
    /// Their names.
    pub names: Vec<String>,
    /// The host-integer inputs.
    pub host: Vec<&'c [i32]>,
    /// The run-time sizes.
    pub sizes: Vec<(String, u64)>,
}

/// How an input's values are drawn when the family does not say: floats uniform in
/// `[-1, 1)`, small integers.
fn default_values(dtype: Dtype) -> InputValues {
    let (min, max) = match dtype {
        Dtype::Bool => (0.0, 1.0),
        Dtype::I8 => (-8.0, 7.0),
        Dtype::U8 => (0.0, 255.0),
        Dtype::U16 => (0.0, 65535.0),
        Dtype::U32 => (0.0, u32::MAX as f64),
        Dtype::I32 => (0.0, 15.0),
        _ => (-1.0, 1.0),
    };
    InputValues::Range { min, max }
}

/// One float: uniform in `[min, max)`, or one of the set.
fn draw_float(values: &InputValues, rng: &mut SplitMix64) -> f64 {
    match values {
        InputValues::Range { min, max } => min + (max - min) * rng.unit(),
        InputValues::Set(set) => set[rng.int(0, set.len() as i64 - 1) as usize],
    }
}

/// One integer: uniform in `min..=max`, or one of the set.
fn draw_int(values: &InputValues, rng: &mut SplitMix64) -> i64 {
    match values {
        InputValues::Range { min, max } => rng.int(*min as i64, *max as i64),
        InputValues::Set(set) => set[rng.int(0, set.len() as i64 - 1) as usize] as i64,
    }
}

fn value_bytes(dtype: Dtype, rng: &mut SplitMix64, values: &InputValues, out: &mut Vec<u8>) {
    match dtype {
        Dtype::F32 => out.extend((draw_float(values, rng) as f32).to_le_bytes()),
        Dtype::F16 => out.extend(f16::from_f64(draw_float(values, rng)).to_le_bytes()),
        Dtype::Bf16 => out.extend(bf16::from_f64(draw_float(values, rng)).to_le_bytes()),
        Dtype::I8 => out.push(draw_int(values, rng) as i8 as u8),
        Dtype::U8 | Dtype::Bool => out.push(draw_int(values, rng) as u8),
        Dtype::U16 => out.extend((draw_int(values, rng) as u16).to_le_bytes()),
        Dtype::I32 => out.extend((draw_int(values, rng) as i32).to_le_bytes()),
        Dtype::U32 => out.extend((draw_int(values, rng) as u32).to_le_bytes()),
        // a dtype of a newer contract: zero bytes of its size
        other => out.extend(std::iter::repeat_n(0, other.size())),
    }
}

/// The bytes of a packed buffer, or of an array of them (`stride` bytes each): each region's
/// values drawn by its format (float regions from the input's values), zeros between regions
/// (the emulator poisons those gaps).
fn packed_bytes(len: usize, stride: usize, regions: &[Region], rng: &mut SplitMix64, values: Option<&InputValues>) -> Vec<u8> {
    let floats = values.cloned().unwrap_or(InputValues::Range { min: -1.0, max: 1.0 });
    let mut out = vec![0u8; len];
    let starts = (0..len.checked_div(stride).unwrap_or(0)).map(|i| i * stride);
    for (start, r) in starts.flat_map(|s| regions.iter().map(move |r| (s, r))) {
        let region = &mut out[start + r.offset as usize..start + (r.offset + r.bytes) as usize];
        match r.format {
            Format::F32 => {
                for c in region.chunks_exact_mut(4) {
                    c.copy_from_slice(&(draw_float(&floats, rng) as f32).to_le_bytes());
                }
            }
            Format::F16 | Format::Bf16 => {
                for c in region.chunks_exact_mut(2) {
                    let v = draw_float(&floats, rng);
                    c.copy_from_slice(&if r.format == Format::F16 { f16::from_f64(v).to_le_bytes() } else { bf16::from_f64(v).to_le_bytes() });
                }
            }
            _ => region.iter_mut().for_each(|b| *b = rng.next_u64() as u8),
        }
    }
    out
}

/// This machine's physical memory in bytes (no bound where it cannot be read).
fn physical_memory() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a constant of the system.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        if pages > 0 && page > 0 {
            return (pages as u64).saturating_mul(page as u64);
        }
    }
    u64::MAX
}

/// Random inputs for `def` at `sizes` (every run-time size, by name), from its contract:
/// floats uniform in `[-1, 1)`, small integers, packed regions by their format, host integers
/// within the size that bounds them; `values` says how to draw an input instead, by name
/// (a range, or a set of values).
pub fn random_case(def: &KernelDef, sizes: &[(&str, u64)], values: &[(String, InputValues)], seed: u64) -> Result<Case, Error> {
    let mut rng = SplitMix64::new(seed);
    let mut case = Case::new();
    for name in def.sizes.iter() {
        let (_, v) = sizes.iter().find(|(n, _)| *n == name.as_ref()).ok_or_else(|| CaseProblem::MissingSize(name.to_string()))?;
        case.sizes.insert(name.to_string(), *v);
    }
    if let Some((name, _)) = sizes.iter().find(|(n, _)| !def.sizes.iter().any(|s| s.as_ref() == *n)) {
        return Err(CaseProblem::UnknownSize(name.to_string()).into());
    }
    let at: Vec<u64> = def.sizes.iter().map(|n| case.sizes[n.as_ref()]).collect();
    let values_of = |name: &str| values.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let sizes_text = || def.sizes.iter().zip(&at).map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(", ");
    for b in def.inputs.iter() {
        let input = |problem| Error::Input { input: b.name.to_string(), sizes: sizes_text(), problem };
        let shape = b.shape_at(&at).ok_or_else(|| input(InputProblem::ShapeOverflows))?;
        // sizes a family file or a caller gave: refused, not a panic or an abort, when the
        // input cannot be held
        let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = n.and_then(|n| n.checked_mul(b.dtype.size() as u64).filter(|&x| x <= physical_memory()));
        let (Some(n), Some(_)) = (n, bytes) else {
            return Err(input(InputProblem::TooLarge { shape, dtype: b.dtype }));
        };
        match b.source {
            Source::Data if !b.regions.is_empty() => {
                let stride = b.packed_bytes().unwrap_or(n) as usize;
                let bytes = packed_bytes(n as usize, stride, &b.regions, &mut rng, values_of(&b.name));
                case.arrays.insert(b.name.to_string(), HostArray::new(b.dtype, shape, bytes));
            }
            Source::Data => {
                let drawn = values_of(&b.name).cloned().unwrap_or_else(|| default_values(b.dtype));
                let mut bytes = Vec::with_capacity(n as usize * b.dtype.size());
                for _ in 0..n {
                    value_bytes(b.dtype, &mut rng, &drawn, &mut bytes);
                }
                case.arrays.insert(b.name.to_string(), HostArray::new(b.dtype, shape, bytes));
            }
            Source::HostInts => {
                let drawn = match (values_of(&b.name), b.at_most) {
                    (Some(set @ InputValues::Set(_)), _) => set.clone(),
                    (range, bound) => {
                        let hi = match (bound, range) {
                            (Some(i), _) => at[i] as f64,
                            (None, Some(InputValues::Range { max, .. })) => *max,
                            _ => 15.0,
                        };
                        let lo = match range {
                            Some(InputValues::Range { min, .. }) => *min,
                            _ => 0.0,
                        };
                        InputValues::Range { min: lo.min(hi), max: hi }
                    }
                };
                case.host.insert(b.name.to_string(), (0..n).map(|_| draw_int(&drawn, &mut rng) as i32).collect());
            }
            _ => {}
        }
    }
    Ok(case)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set draws only its values, and each of them (ties on purpose); a range stays inside.
    #[test]
    fn a_value_set_draws_only_its_values() {
        let mut rng = SplitMix64::new(3);
        let set = InputValues::Set(vec![-1.0, 0.0, 2.5]);
        let mut seen = [0usize; 3];
        for _ in 0..300 {
            let mut b = Vec::new();
            value_bytes(Dtype::F32, &mut rng, &set, &mut b);
            let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let i = [-1.0, 0.0, 2.5].iter().position(|x| *x == v).unwrap_or_else(|| panic!("{v} is not in the set"));
            seen[i] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        let ints = InputValues::Set(vec![3.0, 7.0]);
        for _ in 0..50 {
            assert!([3, 7].contains(&draw_int(&ints, &mut rng)));
        }
        let range = InputValues::Range { min: -4.0, max: 4.0 };
        for _ in 0..100 {
            let v = draw_float(&range, &mut rng);
            assert!((-4.0..4.0).contains(&v));
        }
    }
}

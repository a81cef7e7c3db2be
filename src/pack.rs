//! Building packed buffers (an expert's residency slot) from their unpacked
//! parts, by the one layout the kernels read ([`PackedLayout`], generated
//! from the family file for every geometry).
//!
//! The generated launchers wrap [`pack`] in a typed function per packed
//! buffer (`Glm52ExpertQ4Bf16R4::pack_slot(gate_weights, ..., down_scales)`),
//! so a caller passes each region's values in its documented orientation and
//! gets the buffer's bytes, page-aligned, ready for
//! the MLX backend's `array_from_bytes` (zero-copy on Apple
//! silicon) or for the emulator.

use crate::contract::{Format, PackedLayout, Region};
use half::{bf16, f16};
use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Apple silicon's page size: memory aligned to it can back a Metal buffer
/// without a copy.
pub const PAGE_ALIGN: usize = 16 * 1024;

/// Bytes on the heap aligned to [`PAGE_ALIGN`] (zero-filled on creation).
pub struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBytes owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBytes {}
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// `len` zero bytes, page-aligned.
    pub fn zeroed(len: usize) -> Self {
        if len == 0 {
            // A dangling, aligned pointer for the empty buffer (never dereferenced).
            let ptr = NonNull::new(PAGE_ALIGN as *mut u8).expect("nonzero");
            return AlignedBytes { ptr, len };
        }
        let layout = Layout::from_size_align(len, PAGE_ALIGN).expect("a length that fits isize");
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr) else { alloc::handle_alloc_error(layout) };
        AlignedBytes { ptr, len }
    }

    /// A page-aligned copy of `bytes`.
    pub fn copy_from(bytes: &[u8]) -> Self {
        let mut b = AlignedBytes::zeroed(bytes.len());
        b.copy_from_slice(bytes);
        b
    }

    /// The first byte (page-aligned; dangling but aligned when empty).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for AlignedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or len is 0 and ptr aligned).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and the allocation is ours alone.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBytes {
    fn clone(&self) -> Self {
        AlignedBytes::copy_from(self)
    }
}

impl fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlignedBytes({} bytes)", self.len)
    }
}

impl PartialEq for AlignedBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if self.len != 0 {
            let layout = Layout::from_size_align(self.len, PAGE_ALIGN).expect("as allocated");
            // SAFETY: allocated with this layout in `zeroed`.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

/// One region's values, in the format its layout declares.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum RegionData<'a> {
    /// Raw bytes, copied as they are.
    Bytes(&'a [u8]),
    /// Values -8..=7, stored two a byte (least significant first) as `value + 8`.
    Q4(&'a [i8]),
    /// Signed bytes (Q8 weights), one a byte.
    I8(&'a [i8]),
    /// `int32` values, little-endian.
    I32(&'a [i32]),
    /// `uint32` values, little-endian.
    U32(&'a [u32]),
    /// `half` values, little-endian.
    F16(&'a [f16]),
    /// `bfloat` values, little-endian.
    Bf16(&'a [bf16]),
    /// `float` values, little-endian (an expert's row scales).
    F32(&'a [f32]),
}

impl RegionData<'_> {
    fn format(&self) -> Format {
        match self {
            RegionData::Bytes(_) => Format::Bytes,
            RegionData::Q4(_) => Format::Q4,
            RegionData::I8(_) => Format::I8,
            RegionData::I32(_) => Format::I32,
            RegionData::U32(_) => Format::U32,
            RegionData::F16(_) => Format::F16,
            RegionData::Bf16(_) => Format::Bf16,
            RegionData::F32(_) => Format::F32,
        }
    }

    fn len(&self) -> usize {
        match self {
            RegionData::Bytes(v) => v.len(),
            RegionData::Q4(v) | RegionData::I8(v) => v.len(),
            RegionData::I32(v) => v.len(),
            RegionData::U32(v) => v.len(),
            RegionData::F16(v) => v.len(),
            RegionData::Bf16(v) => v.len(),
            RegionData::F32(v) => v.len(),
        }
    }

    /// The region's bytes.
    fn encode(&self, out: &mut [u8]) {
        match self {
            RegionData::Bytes(v) => out.copy_from_slice(v),
            RegionData::Q4(v) => {
                for (byte, pair) in out.iter_mut().zip(v.chunks_exact(2)) {
                    *byte = (pair[0] + 8) as u8 | (((pair[1] + 8) as u8) << 4);
                }
            }
            RegionData::I8(v) => {
                for (o, x) in out.iter_mut().zip(v.iter()) {
                    *o = *x as u8;
                }
            }
            RegionData::I32(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            RegionData::U32(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            RegionData::F16(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            RegionData::Bf16(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
            RegionData::F32(v) => put(out, v.iter().map(|x| x.to_le_bytes())),
        }
    }
}

fn put<const N: usize>(out: &mut [u8], values: impl Iterator<Item = [u8; N]>) {
    for (chunk, v) in out.chunks_exact_mut(N).zip(values) {
        chunk.copy_from_slice(&v);
    }
}

/// Why a buffer could not be packed: every problem, per region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackError {
    /// The packed buffer (`slot`).
    pub buffer: String,
    /// `(region, what is wrong)`.
    pub problems: Vec<(String, String)>,
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot pack `{}`:", self.buffer)?;
        for (region, what) in &self.problems {
            write!(f, "\n  - region `{region}`: {what}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PackError {}

fn shape_text(r: &Region) -> String {
    format!("[{}]", r.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
}

/// Packs `data` (one entry per region, in the layout's order) into a new
/// buffer of `layout.bytes` page-aligned bytes; bytes outside the regions are
/// zero. Every region's format and value count are checked (and Q4 values'
/// range); nothing is returned unless all are right.
pub fn pack(layout: &PackedLayout, data: &[RegionData<'_>]) -> Result<AlignedBytes, PackError> {
    let mut problems = Vec::new();
    if data.len() != layout.regions.len() {
        let names: Vec<&str> = layout.regions.iter().map(|r| r.name.as_ref()).collect();
        problems.push(("(all)".to_string(), format!("expected {} regions ({}), given {}", names.len(), names.join(", "), data.len())));
    }
    for (r, d) in layout.regions.iter().zip(data) {
        let values = if r.shape.is_empty() { Some(r.format.bytes_for(1).map_or(0, |b| r.bytes / b)) } else { r.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)) };
        let Some(values) = values else {
            problems.push((r.name.to_string(), format!("its shape {} has more than 2^64 values", shape_text(r))));
            continue;
        };
        if d.format() != r.format {
            problems.push((r.name.to_string(), format!("expected {} values, given {}", r.format.name(), d.format().name())));
        } else if d.len() as u64 != values {
            problems.push((r.name.to_string(), format!("expected {values} values ({} {}), given {}", r.format.name(), shape_text(r), d.len())));
        } else if let RegionData::Q4(v) = d {
            if let Some((i, x)) = v.iter().enumerate().find(|(_, x)| !(-8..=7).contains(*x)) {
                problems.push((r.name.to_string(), format!("value {x} at index {i} is outside -8..=7 (a Q4 value)")));
            }
        }
        if r.offset.checked_add(r.bytes).is_none_or(|end| end > layout.bytes) {
            problems.push((r.name.to_string(), format!("the layout places it at {}..{} in a {}-byte buffer", r.offset, r.offset.saturating_add(r.bytes), layout.bytes)));
        }
        // (a layout's fields are public: one not made by the generator may disagree with itself)
        if r.format.bytes_for(values) != Some(r.bytes) {
            problems.push((r.name.to_string(), format!("the layout gives it {} bytes, where {values} {} values take {}", r.bytes, r.format.name(), r.format.bytes_for(values).map_or("more than 2^64".to_string(), |b| b.to_string()))));
        }
    }
    // a packed buffer is one uint8 argument: at most as many bytes as an argument has elements
    if layout.bytes > crate::launch::MAX_ELEMENTS {
        problems.push(("(all)".to_string(), format!("the layout is {} bytes, more than the {} an argument may have", layout.bytes, crate::launch::MAX_ELEMENTS)));
    }
    if !problems.is_empty() {
        return Err(PackError { buffer: layout.name.to_string(), problems });
    }
    let mut out = AlignedBytes::zeroed(layout.bytes as usize);
    for (r, d) in layout.regions.iter().zip(data) {
        d.encode(&mut out[r.offset as usize..(r.offset + r.bytes) as usize]);
    }
    Ok(out)
}

/// Stacks packed buffers of one layout (each from [`pack`] or a generated packer, such as S
/// experts' `pack_slot`) into the `[S, layout.bytes]` array a kernel taking an array of them
/// reads (`Glm52ExpertQ4Bf16R4::gate_up_grouped`'s `slots`): buffer `s` at bytes
/// `s * layout.bytes..`, page-aligned. Each must be `layout.bytes` long, and the layout's size a
/// multiple of its alignment (so every buffer of the array starts aligned).
pub fn stack(layout: &PackedLayout, buffers: &[&[u8]]) -> Result<AlignedBytes, PackError> {
    let mut problems = Vec::new();
    let align = layout.regions.iter().map(|r| r.align).fold(layout.align, u64::max);
    if align > 1 && layout.bytes % align != 0 {
        problems.push(("(all)".to_string(), format!("the layout is {} bytes, not a multiple of the alignment {align} it and its regions need: the second buffer would start misaligned", layout.bytes)));
    }
    for (i, b) in buffers.iter().enumerate() {
        if b.len() as u64 != layout.bytes {
            problems.push((format!("(buffer {i})"), format!("expected {} bytes, given {}", layout.bytes, b.len())));
        }
    }
    let total = (buffers.len() as u64).checked_mul(layout.bytes).filter(|&t| t <= isize::MAX as u64);
    if total.is_none() {
        problems.push(("(all)".to_string(), format!("{} buffers of {} bytes are more than memory holds", buffers.len(), layout.bytes)));
    }
    if !problems.is_empty() {
        return Err(PackError { buffer: layout.name.to_string(), problems });
    }
    let mut out = AlignedBytes::zeroed(total.unwrap_or(0) as usize);
    for (chunk, b) in out.chunks_exact_mut(layout.bytes.max(1) as usize).zip(buffers) {
        chunk.copy_from_slice(b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn stack_places_each_buffer_at_its_index_and_refuses_bad_lengths() {
        let layout = PackedLayout { name: Cow::Borrowed("slot"), bytes: 8, align: 4, regions: vec![region("w", 0, Format::I8, &[4])].into() };
        let (a, b) = ([1u8; 8], [2u8; 8]);
        let s = stack(&layout, &[&a, &b, &a]).unwrap();
        assert_eq!(s.as_ptr() as usize % PAGE_ALIGN, 0);
        assert_eq!(&s[..], &[[1u8; 8], [2; 8], [1; 8]].concat()[..]);
        assert!(stack(&layout, &[]).unwrap().is_empty());
        let e = stack(&layout, &[&a, &[0u8; 7]]).unwrap_err();
        assert_eq!(e.problems, vec![("(buffer 1)".to_string(), "expected 8 bytes, given 7".to_string())]);
        let odd = PackedLayout { bytes: 6, ..layout.clone() };
        assert!(stack(&odd, &[&[0u8; 6]]).unwrap_err().to_string().contains("not a multiple of the alignment 4 it and its regions need"));
        // the layout asks for no alignment, its region for 4: the second buffer's region would be off
        let region_aligned = PackedLayout { bytes: 6, align: 1, ..layout };
        assert!(stack(&region_aligned, &[&[0u8; 6]]).unwrap_err().to_string().contains("not a multiple of the alignment 4 it and its regions need"));
    }

    fn region(name: &'static str, offset: u64, format: Format, shape: &'static [u64]) -> Region {
        let values: u64 = shape.iter().product();
        Region { name: Cow::Borrowed(name), offset, bytes: format.bytes_for(values).unwrap(), align: 4, format, shape: Cow::Borrowed(shape) }
    }

    #[test]
    fn packs_each_format_at_its_offset() {
        let layout = PackedLayout {
            name: Cow::Borrowed("slot"),
            bytes: 64,
            align: 4,
            regions: vec![region("w", 0, Format::Q4, &[2, 4]), region("s", 8, Format::F32, &[2]), region("b", 20, Format::I8, &[3])].into(),
        };
        let packed = pack(&layout, &[RegionData::Q4(&[-8, 7, 0, 1, -1, 2, 3, -3]), RegionData::F32(&[1.5, -2.0]), RegionData::I8(&[-1, 2, -128])]).unwrap();
        assert_eq!(packed.as_ptr() as usize % PAGE_ALIGN, 0);
        assert_eq!(&packed[0..4], &[0xF0, 0x98, 0xA7, 0x5B]);
        assert_eq!(&packed[8..12], &1.5f32.to_le_bytes());
        assert_eq!(&packed[12..16], &(-2.0f32).to_le_bytes());
        assert_eq!(&packed[20..23], &[0xFF, 0x02, 0x80]);
        assert!(packed[4..8].iter().chain(&packed[16..20]).chain(&packed[23..]).all(|&b| b == 0));
    }

    #[test]
    fn every_problem_is_reported() {
        let layout = PackedLayout {
            name: Cow::Borrowed("slot"),
            bytes: 64,
            align: 4,
            regions: vec![region("w", 0, Format::Q4, &[2, 4]), region("s", 8, Format::F32, &[2])].into(),
        };
        let e = pack(&layout, &[RegionData::Q4(&[9, 0, 0, 0, 0, 0, 0, 0]), RegionData::I8(&[1, 2])]).unwrap_err();
        assert_eq!(e.problems.len(), 2, "{e}");
        assert!(e.to_string().contains("value 9 at index 0"), "{e}");
        assert!(e.to_string().contains("expected f32 values, given i8"), "{e}");
        let e = pack(&layout, &[RegionData::Q4(&[0; 6])]).unwrap_err();
        assert!(e.to_string().contains("expected 2 regions"), "{e}");
        assert!(e.to_string().contains("expected 8 values"), "{e}");
    }

    /// A layout whose regions' bytes disagree with their shapes (its fields are public): an
    /// error, where a copy panicked or values were dropped.
    #[test]
    fn a_layout_that_disagrees_with_itself_is_refused() {
        let bad = |r: Region, bytes: u64| PackedLayout { name: Cow::Borrowed("slot"), bytes, align: 4, regions: vec![r].into() };
        let short = Region { bytes: 4, ..region("s", 0, Format::F32, &[4]) };
        let e = pack(&bad(short, 64), &[RegionData::F32(&[1.0; 4])]).unwrap_err();
        assert!(e.to_string().contains("the layout gives it 4 bytes, where 4 f32 values take 16"), "{e}");
        let long = Region { bytes: 12, ..region("b", 0, Format::Bytes, &[10]) };
        assert!(pack(&bad(long, 64), &[RegionData::Bytes(&[0; 10])]).is_err());
        let odd = Region { bytes: 1, ..region("w", 0, Format::Q4, &[2]) };
        let odd = Region { shape: Cow::Borrowed(&[3]), ..odd };
        assert!(pack(&bad(odd, 64), &[RegionData::Q4(&[1, 2, 3])]).is_err());
        let e = pack(&bad(region("s", 0, Format::F32, &[1]), u64::MAX), &[RegionData::F32(&[1.0])]).unwrap_err();
        assert!(e.to_string().contains("more than the 2147483647 an argument may have"), "{e}");
        let huge = Region { shape: Cow::Borrowed(&[1 << 40, 1 << 40]), ..region("s", 0, Format::F32, &[1]) };
        assert!(pack(&bad(huge, 64), &[RegionData::F32(&[1.0])]).unwrap_err().to_string().contains("more than 2^64 values"));
    }
}

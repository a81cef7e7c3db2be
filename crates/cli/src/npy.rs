//! .npy files to and from host arrays, as raw little-endian bytes. numpy has
//! no bfloat16: a bf16 argument travels as a uint16 array of the same bits.
//!
//! Besides the dtypes of kernel contracts (`kernelgen::Dtype`, shared with the
//! generated code), `kernelgen emu` takes int16, int64 and uint64 buffers (MLX
//! passes shapes as int32 and strides as int64): those stay local to the CLI
//! ([`FileDtype`]), so the contract and generated/ are unchanged.

use kernelgen_emu::HostArray;
use kernelgen::Dtype;
use npyz::{DType, WriterBuilder};
use std::fmt;
use std::io::Read;
use std::path::Path;

/// The element type of a .npy file: a contract dtype, or one only `kernelgen emu` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileDtype {
    Contract(Dtype),
    I16,
    I64,
    U64,
}

impl FileDtype {
    #[cfg(test)]
    pub const EXTRA: [FileDtype; 3] = [FileDtype::I16, FileDtype::I64, FileDtype::U64];

    pub fn size(self) -> usize {
        match self {
            FileDtype::Contract(d) => d.size(),
            FileDtype::I16 => 2,
            FileDtype::I64 | FileDtype::U64 => 8,
        }
    }

    pub fn numpy_name(self) -> &'static str {
        match self {
            FileDtype::Contract(d) => d.numpy_name(),
            FileDtype::I16 => "int16",
            FileDtype::I64 => "int64",
            FileDtype::U64 => "uint64",
        }
    }

    /// Numpy names (`float32`, `int64`, ...) and short names (`f32`, `i64`, ...).
    pub fn parse(name: &str) -> Option<FileDtype> {
        if let Some(d) = Dtype::parse(name) {
            return Some(FileDtype::Contract(d));
        }
        Some(match name {
            "int16" | "i16" => FileDtype::I16,
            "int64" | "i64" => FileDtype::I64,
            "uint64" | "u64" => FileDtype::U64,
            _ => return None,
        })
    }

    /// The dtype of a CUDA kernel's pointer parameter to this type, if it is one: CUDA's
    /// half-precision names, then the C++ names both languages share.
    pub fn of_cuda_type(name: &str) -> Option<FileDtype> {
        match name {
            "__half" | "half" => Some(FileDtype::Contract(Dtype::F16)),
            "__nv_bfloat16" | "nv_bfloat16" => Some(FileDtype::Contract(Dtype::Bf16)),
            "bfloat" | "uint" | "uchar" | "ushort" | "ulong" => None, // Metal's alone
            _ => Self::of_metal_type(name),
        }
    }

    /// The dtype of a kernel parameter declared with this Metal type, if it is one.
    pub fn of_metal_type(name: &str) -> Option<FileDtype> {
        Some(match name {
            "half" => FileDtype::Contract(Dtype::F16),
            "bfloat" => FileDtype::Contract(Dtype::Bf16),
            "int" => FileDtype::Contract(Dtype::I32),
            "uint" | "unsigned int" => FileDtype::Contract(Dtype::U32),
            "char" | "signed char" => FileDtype::Contract(Dtype::I8),
            "uchar" | "unsigned char" => FileDtype::Contract(Dtype::U8),
            "ushort" | "unsigned short" => FileDtype::Contract(Dtype::U16),
            "short" | "int16_t" => FileDtype::I16,
            "long" | "int64_t" => FileDtype::I64,
            "ulong" | "uint64_t" | "size_t" | "unsigned long" => FileDtype::U64,
            _ => return Dtype::ALL.into_iter().find(|d| d.metal_name() == name).map(FileDtype::Contract),
        })
    }

    fn descr(self) -> Option<&'static str> {
        match self {
            FileDtype::Contract(d) => descr(d),
            FileDtype::I16 => Some("<i2"),
            FileDtype::I64 => Some("<i8"),
            FileDtype::U64 => Some("<u8"),
        }
    }
}

impl fmt::Display for FileDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.numpy_name())
    }
}

/// The contents of a .npy file.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub dtype: FileDtype,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

impl NpyArray {
    /// As a host array of a contract dtype (what kernel launches take).
    pub fn into_host(self, path: &Path) -> Result<HostArray, String> {
        match self.dtype {
            FileDtype::Contract(d) => Ok(HostArray::new(d, self.shape, self.data)),
            other => Err(format!(
                "{}: dtype {other} is not a kernel argument type (float32, float16, bfloat16 as uint16, int8, uint8, uint16, int32, uint32, bool)",
                path.display()
            )),
        }
    }
}

fn descr(d: Dtype) -> Option<&'static str> {
    Some(match d {
        Dtype::F32 => "<f4",
        Dtype::F16 => "<f2",
        Dtype::Bf16 | Dtype::U16 => "<u2",
        Dtype::I8 => "|i1",
        Dtype::U8 => "|u1",
        Dtype::I32 => "<i4",
        Dtype::U32 => "<u4",
        Dtype::Bool => "|b1",
        _ => return None,
    })
}

fn from_descr(s: &str) -> Option<FileDtype> {
    Some(FileDtype::Contract(match s.trim_start_matches(['<', '|', '=']) {
        "f4" => Dtype::F32,
        "f2" => Dtype::F16,
        "u2" => Dtype::U16,
        "i1" => Dtype::I8,
        "u1" => Dtype::U8,
        "i4" => Dtype::I32,
        "u4" => Dtype::U32,
        "b1" => Dtype::Bool,
        "i2" => return Some(FileDtype::I16),
        "i8" => return Some(FileDtype::I64),
        "u8" => return Some(FileDtype::U64),
        _ => return None,
    }))
}

/// Reads a C-ordered, little-endian .npy of a contract dtype (for kernel launches).
pub fn read(path: &Path) -> Result<HostArray, String> {
    read_any(path)?.into_host(path)
}

/// Reads a C-ordered, little-endian .npy of any dtype `kernelgen emu` takes.
pub fn read_any(path: &Path) -> Result<NpyArray, String> {
    let err = |m: String| format!("{}: {m}", path.display());
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).map_err(|e| err(format!("not a .npy file: {e}")))?;
    let text = match npy.dtype() {
        DType::Plain(t) => t.to_string(),
        other => return Err(err(format!("structured dtype {} is not supported", other.descr()))),
    };
    let dtype = from_descr(&text).ok_or_else(|| {
        let why = if text.trim_start_matches(['<', '|', '=']) == "f8" { " (Metal has no double: convert to float32)" } else { "" };
        err(format!(
            "dtype {text} is not supported{why} (use float32, float16, int8, uint8, int16, uint16 (also for bfloat16), int32, uint32, int64, uint64 or bool, little-endian)"
        ))
    })?;
    if npy.order() != npyz::Order::C {
        return Err(err("Fortran-ordered arrays are not supported: save with np.ascontiguousarray".into()));
    }
    let shape = npy.shape().to_vec();
    let mut data = Vec::new();
    npy.into_inner().read_to_end(&mut data).map_err(|e| err(e.to_string()))?;
    let want = shape
        .iter()
        .try_fold(dtype.size() as u64, |acc, d| acc.checked_mul(*d))
        .ok_or_else(|| err(format!("shape {shape:?} has more elements than 64 bits count")))?;
    if data.len() as u64 != want {
        return Err(err(format!("holds {} bytes of data where shape {shape:?} and dtype {dtype} need {want}", data.len())));
    }
    Ok(NpyArray { dtype, shape, data })
}

/// Writes an array as .npy (a bf16 array as uint16 bits).
pub fn write(path: &Path, a: &HostArray) -> Result<(), String> {
    write_any(path, &NpyArray { dtype: FileDtype::Contract(a.dtype), shape: a.shape.clone(), data: a.data.to_vec() })
}

/// Writes an array of any dtype `kernelgen emu` takes as .npy.
pub fn write_any(path: &Path, a: &NpyArray) -> Result<(), String> {
    let err = |m: String| format!("{}: {m}", path.display());
    let descr = a.dtype.descr().ok_or_else(|| err(format!("no .npy dtype for {}", a.dtype)))?;
    let dtype = DType::parse(&format!("'{descr}'")).map_err(|e| err(e.to_string()))?;
    // Written beside, then renamed over the name: a link there is replaced, never followed
    // (its target is untouched), and a failed write leaves no half file.
    let name = path.file_name().ok_or_else(|| err("not a file name".into()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| -> std::io::Result<()> {
        let file = std::fs::File::create_new(&tmp)?;
        let mut w = npyz::WriteOptions::new_header_only().dtype(dtype).shape(&a.shape).writer(std::io::BufWriter::new(file)).write_header_only()?;
        std::io::Write::write_all(&mut w, &a.data)?;
        std::io::Write::flush(&mut w)?;
        drop(w);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e.to_string()));
    }
    Ok(())
}

/// Reinterprets a uint16 array as bf16 when the contract wants bf16.
pub fn as_dtype(mut a: HostArray, want: Dtype) -> HostArray {
    if want == Dtype::Bf16 && a.dtype == Dtype::U16 {
        a.dtype = Dtype::Bf16;
    }
    a
}

/// The elements of an int32 array (host-integer arguments such as kept lengths).
pub fn to_i32(a: &HostArray) -> Result<Vec<i32>, String> {
    if a.dtype != Dtype::I32 {
        return Err(format!("expected an int32 .npy, given {}", a.dtype.numpy_name()));
    }
    Ok(a.data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype() {
        let dir = std::env::temp_dir().join(format!("kernelgen-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for d in Dtype::ALL {
            let a = HostArray::new(d, vec![2, 3], (0..6 * d.size()).map(|i| (i % 2) as u8).collect());
            let p = dir.join(format!("{d}.npy"));
            write(&p, &a).unwrap();
            let b = as_dtype(read(&p).unwrap(), d);
            assert_eq!(a, b, "{d}");
        }
        for d in FileDtype::EXTRA {
            let a = NpyArray { dtype: d, shape: vec![3], data: (0..3 * d.size()).map(|i| i as u8).collect() };
            let p = dir.join(format!("{d}.npy"));
            write_any(&p, &a).unwrap();
            assert_eq!(read_any(&p).unwrap(), a, "{d}");
            assert!(read(&p).unwrap_err().contains("not a kernel argument type"), "{d}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An output name that is a link (`run --out o` with `o/y.npy -> /elsewhere`) is replaced
    /// by the array; the file it pointed at outside the output folder is untouched.
    #[cfg(unix)]
    #[test]
    fn a_link_in_the_way_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        let p = dir.path().join("out/y.npy");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let a = HostArray::new(Dtype::F32, vec![1], vec![0, 0, 128, 63]);
        write(&p, &a).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
        assert_eq!(read(&p).unwrap(), a);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("out")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["y.npy"], "no temporary file left");
    }
}

//! .npy files to and from host arrays, as raw little-endian bytes. numpy has
//! no bfloat16: a bf16 argument travels as a uint16 array of the same bits.

use kernelgen_emu::HostArray;
use kernelgen::Dtype;
use npyz::{DType, WriterBuilder};
use std::io::Read;
use std::path::Path;

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

fn from_descr(s: &str) -> Option<Dtype> {
    Some(match s.trim_start_matches(['<', '|', '=']) {
        "f4" => Dtype::F32,
        "f2" => Dtype::F16,
        "u2" => Dtype::U16,
        "i1" => Dtype::I8,
        "u1" => Dtype::U8,
        "i4" => Dtype::I32,
        "u4" => Dtype::U32,
        "b1" => Dtype::Bool,
        _ => return None,
    })
}

/// Reads a C-ordered, little-endian .npy of a supported dtype.
pub fn read(path: &Path) -> Result<HostArray, String> {
    let err = |m: String| format!("{}: {m}", path.display());
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).map_err(|e| err(format!("not a .npy file: {e}")))?;
    let text = match npy.dtype() {
        DType::Plain(t) => t.to_string(),
        other => return Err(err(format!("structured dtype {} is not supported", other.descr()))),
    };
    let dtype = from_descr(&text).ok_or_else(|| {
        err(format!("dtype {text} is not supported (use float32, float16, int8, uint8, uint16 (also for bfloat16), int32, uint32 or bool, little-endian)"))
    })?;
    if npy.order() != npyz::Order::C {
        return Err(err("Fortran-ordered arrays are not supported: save with np.ascontiguousarray".into()));
    }
    let shape = npy.shape().to_vec();
    let mut data = Vec::new();
    npy.into_inner().read_to_end(&mut data).map_err(|e| err(e.to_string()))?;
    let want = shape.iter().product::<u64>() as usize * dtype.size();
    if data.len() != want {
        return Err(err(format!("holds {} bytes of data where shape {shape:?} and dtype {dtype} need {want}", data.len())));
    }
    Ok(HostArray::new(dtype, shape, data))
}

/// Writes an array as .npy (a bf16 array as uint16 bits).
pub fn write(path: &Path, a: &HostArray) -> Result<(), String> {
    let err = |m: String| format!("{}: {m}", path.display());
    let descr = descr(a.dtype).ok_or_else(|| err(format!("no .npy dtype for {}", a.dtype)))?;
    let dtype = DType::parse(&format!("'{descr}'")).map_err(|e| err(e.to_string()))?;
    let file = std::fs::File::create(path).map_err(|e| err(e.to_string()))?;
    let mut w = npyz::WriteOptions::new_header_only()
        .dtype(dtype)
        .shape(&a.shape)
        .writer(std::io::BufWriter::new(file))
        .write_header_only()
        .map_err(|e| err(e.to_string()))?;
    std::io::Write::write_all(&mut w, &a.data).map_err(|e| err(e.to_string()))?;
    std::io::Write::flush(&mut w).map_err(|e| err(e.to_string()))
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Content keys (a 128-bit FNV-1a over length-prefixed parts) and atomic file writes.

use std::fs;
use std::io::Write;
use std::path::Path;

pub fn hash_hex(parts: &[&str]) -> String {
    // Two FNV-1a lanes with different offsets: a cache key, not a security boundary.
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    let mut feed = |bytes: &[u8]| {
        for &x in bytes {
            a = (a ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3);
            b = (b ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(5);
        }
    };
    for p in parts {
        feed(&(p.len() as u64).to_le_bytes());
        feed(p.as_bytes());
    }
    format!("{a:016x}{b:016x}")
}

/// Write through a temporary name and rename, so concurrent checkers never see half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
    }
    fs::rename(&tmp, path)
}

//! Content keys (SHA-256 over length-prefixed parts) and atomic file writes.

use std::fs;
use std::io::Write;
use std::path::Path;

/// A name for everything `parts` holds (collision-resistant: two inputs that share a key
/// would share a cached verdict).
pub fn hash_hex(parts: &[&str]) -> String {
    let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
    crate::private_dir::sha256_hex(&bytes)
}

/// A temporary name beside `path`, unique to this process and call (threads of one process
/// write the same file at once: the checks of a new Metal version each prepare its prelude).
pub fn temp_name(path: &Path) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}-{n}", std::process::id()));
    path.with_file_name(name)
}

/// `bytes` in a new temporary file beside `path` ([`temp_name`]), to be moved into place whole.
fn write_temp(path: &Path, bytes: &[u8]) -> std::io::Result<std::path::PathBuf> {
    let tmp = temp_name(path);
    fs::File::create(&tmp)?.write_all(bytes)?;
    Ok(tmp)
}

/// Write through a temporary name and rename, so concurrent checkers never see half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::rename(write_temp(path, bytes)?, path)
}

/// Create `path` with `bytes` unless it exists: never rewritten once there, so its modification
/// time stays what a precompiled header built from it recorded (clang refuses a PCH whose
/// headers changed since, and several processes may prepare one prelude at once). The file
/// appears whole (a hard link of a finished temporary file, which fails if `path` exists).
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    publish(&write_temp(path, bytes)?, path)
}

/// Move the finished file `tmp` to `path` unless `path` exists already (then `tmp` goes).
pub fn publish(tmp: &Path, path: &Path) -> std::io::Result<()> {
    match fs::hard_link(tmp, path) {
        Ok(()) => {
            let _ = fs::remove_file(tmp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(tmp);
            Ok(())
        }
        // No hard links on this file system: rename, as write_atomic does.
        Err(_) => fs::rename(tmp, path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads of one process writing one file at once (the checks of a new Metal version each
    /// preparing its prelude) each succeed, and the file is one of the writes, whole.
    #[test]
    fn concurrent_atomic_writes_of_one_file_all_succeed() {
        let dir = std::env::temp_dir().join(format!("kgmsl-write-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metal_stdlib");
        std::thread::scope(|s| {
            for t in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        write_atomic(path, format!("writer {t}\n").repeat(100).as_bytes()).unwrap();
                    }
                });
            }
        });
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.lines().all(|l| l == text.lines().next().unwrap()) && text.lines().count() == 100);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "temporary files left behind");
        let _ = fs::remove_dir_all(&dir);
    }

    /// A file write_new made is never rewritten (its mtime is what a PCH built from it recorded).
    #[test]
    fn write_new_keeps_the_first_file() {
        let dir = std::env::temp_dir().join(format!("kgmsl-write-new-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pch-root.h");
        write_new(&path, b"first").unwrap();
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_new(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "temporary files left behind");
        let _ = fs::remove_dir_all(&dir);
    }
}

//! The platform calls behind the switch: exchanging two directories in one
//! rename, renaming without replacing, and the lock that serializes runs.
//!
//! - Linux: `renameat2(RENAME_EXCHANGE)` and `renameat2(RENAME_NOREPLACE)`
//!   (through `syscall`, so an old glibc without the wrapper links too).
//! - macOS: `renamex_np(RENAME_SWAP)` and `renamex_np(RENAME_EXCL)`.
//! - Elsewhere, or where the file system refuses the exchange (EINVAL,
//!   ENOTSUP, ENOSYS): two renames. The output directory is then absent for
//!   the instant between them (a kill there leaves the old tree beside it,
//!   under its temporary name), but never mixed.
//! - The lock: `flock` on `<parent>/.<name>.kernelgen-lock` (Unix).

use super::fail;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Exchanges the directories at `a` and `b`. Returns where the tree that was
/// at `b` is now (`a`, unless the fallback put it elsewhere).
pub fn exchange(a: &Path, b: &Path, aside: &Path) -> io::Result<PathBuf> {
    fail::point("exchange")?;
    match native_exchange(a, b) {
        Ok(()) => Ok(a.to_path_buf()),
        Err(e) if unsupported(&e) => {
            fs::rename(b, aside)?;
            if let Err(e) = fs::rename(a, b) {
                // Put the old tree back; it was never touched.
                let _ = fs::rename(aside, b);
                return Err(e);
            }
            Ok(aside.to_path_buf())
        }
        Err(e) => Err(e),
    }
}

/// Renames `a` to `b`, failing if `b` exists (another run created it).
pub fn rename_noreplace(a: &Path, b: &Path) -> io::Result<()> {
    fail::point("rename")?;
    match native_noreplace(a, b) {
        Err(e) if unsupported(&e) => {
            if fs::symlink_metadata(b).is_ok() {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "appeared while the new tree was built"));
            }
            fs::rename(a, b)
        }
        other => other,
    }
}

fn unsupported(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP))
            || e.kind() == io::ErrorKind::Unsupported
    }
    #[cfg(not(unix))]
    {
        e.kind() == io::ErrorKind::Unsupported
    }
}

#[cfg(unix)]
fn c_path(p: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

#[cfg(target_os = "linux")]
fn renameat2(a: &Path, b: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (a, b) = (c_path(a)?, c_path(b)?);
    // SAFETY: both paths are NUL-terminated and outlive the call.
    let r = unsafe { libc::syscall(libc::SYS_renameat2, libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(target_os = "linux")]
fn native_exchange(a: &Path, b: &Path) -> io::Result<()> {
    renameat2(a, b, libc::RENAME_EXCHANGE)
}

#[cfg(target_os = "linux")]
fn native_noreplace(a: &Path, b: &Path) -> io::Result<()> {
    renameat2(a, b, libc::RENAME_NOREPLACE)
}

#[cfg(target_os = "macos")]
fn renamex(a: &Path, b: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (a, b) = (c_path(a)?, c_path(b)?);
    // SAFETY: both paths are NUL-terminated and outlive the call.
    let r = unsafe { libc::renamex_np(a.as_ptr(), b.as_ptr(), flags) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(target_os = "macos")]
fn native_exchange(a: &Path, b: &Path) -> io::Result<()> {
    renamex(a, b, libc::RENAME_SWAP)
}

#[cfg(target_os = "macos")]
fn native_noreplace(a: &Path, b: &Path) -> io::Result<()> {
    renamex(a, b, libc::RENAME_EXCL)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn native_exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn native_noreplace(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// An exclusive lock on one output directory, held while it is replaced:
/// a second `generate` on the same directory waits for the first.
pub struct Lock {
    #[allow(dead_code)]
    path: PathBuf,
    #[cfg(unix)]
    _file: fs::File,
}

impl Lock {
    /// Locks `path`, waiting for the current holder. `waiting` is called
    /// once if it has to wait.
    #[cfg(unix)]
    pub fn acquire(path: &Path, waiting: impl FnOnce()) -> io::Result<Lock> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        fail::point("lock")?;
        let mut waiting = Some(waiting);
        loop {
            let file = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).custom_flags(libc::O_NOFOLLOW).open(path)?;
            // SAFETY: flock on an open descriptor.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    return Err(e);
                }
                if let Some(w) = waiting.take() {
                    w();
                }
                // SAFETY: as above; blocks until the holder is done.
                while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
            // The holder removes the file when it is done: make sure the
            // file locked is the one at `path`, or start again.
            let (ours, there) = (file.metadata()?, fs::symlink_metadata(path));
            if there.is_ok_and(|m| m.dev() == ours.dev() && m.ino() == ours.ino()) {
                return Ok(Lock { path: path.to_path_buf(), _file: file });
            }
        }
    }

    #[cfg(not(unix))]
    pub fn acquire(path: &Path, _waiting: impl FnOnce()) -> io::Result<Lock> {
        fail::point("lock")?;
        Ok(Lock { path: path.to_path_buf() })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Removed while still held, so nothing is left beside the output;
        // a waiter that opened it finds it gone and takes a fresh one.
        #[cfg(unix)]
        let _ = fs::remove_file(&self.path);
    }
}

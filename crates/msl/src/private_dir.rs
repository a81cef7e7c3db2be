//! Cache folders only their owner can write, and names only their owner can compute.
//!
//! A cache holds what a later run trusts: the Metal check's verdicts, the emulator's compiled
//! objects (which it loads and runs). So a cache folder is created `0700`, and one that exists
//! is used only when it belongs to the current user and no group or other user can write it
//! (the folder itself and every subfolder in use). Files are named by a keyed hash (HMAC-SHA-256
//! with a per-cache secret, `key`, created `0600` in the cache): a file planted under a name
//! anyone can reproduce from the inputs is never found. This module serves kernelgen-msl's
//! cache and kernelgen-emu's (which depends on this crate).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The secret's file in a cache folder.
const SECRET_FILE: &str = "key";
const SECRET_LEN: usize = 32;

/// An opened cache folder: private to the current user, with its secret.
pub struct PrivateDir {
    path: PathBuf,
    secret: [u8; SECRET_LEN],
}

impl std::fmt::Debug for PrivateDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateDir").field("path", &self.path).finish_non_exhaustive()
    }
}

impl PrivateDir {
    /// Opens the cache folder `path`, creating it (`0700`, and any missing parent) when it does
    /// not exist; refuses one that another user owns or that a group or other users can write.
    pub fn open(path: &Path) -> Result<PrivateDir, String> {
        ensure_private(path)?;
        let secret = secret(path)?;
        Ok(PrivateDir { path: path.to_path_buf(), secret })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The subfolder `rel` (one or more relative components), each component created `0700`
    /// or checked as [`PrivateDir::open`] checks the cache folder.
    pub fn subdir(&self, rel: impl AsRef<Path>) -> Result<PathBuf, String> {
        let mut dir = self.path.clone();
        for c in rel.as_ref().components() {
            match c {
                std::path::Component::Normal(n) => dir.push(n),
                _ => return Err(format!("cache subfolder {}: not a plain relative path", rel.as_ref().display())),
            }
            ensure_private(&dir)?;
        }
        Ok(dir)
    }

    /// A file name for `parts` (hex HMAC-SHA-256 under this cache's secret, of the parts
    /// length-prefixed): no one without the secret can name the file these inputs read.
    pub fn keyed_name(&self, parts: &[&[u8]]) -> String {
        hex(&hmac_sha256(&self.secret, &length_prefixed(parts)))
    }
}

/// The cache root cargo and the XDG base directories give a user: `$XDG_CACHE_HOME/kernelgen`,
/// else `$HOME/.cache/kernelgen` (never a folder shared between users).
pub fn default_root() -> Result<PathBuf, String> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").and_then(absolute) {
        return Ok(x.join("kernelgen"));
    }
    if let Some(h) = std::env::var_os("HOME").and_then(absolute) {
        return Ok(h.join(".cache").join("kernelgen"));
    }
    Err("no cache folder: neither XDG_CACHE_HOME nor HOME is set to an absolute path; set one, or name a cache folder".into())
}

/// Hex SHA-256 of `parts`, each length-prefixed (so `["ab", "c"]` and `["a", "bc"]` differ).
pub fn sha256_hex(parts: &[&[u8]]) -> String {
    hex(&Sha256::digest(length_prefixed(parts)))
}

fn length_prefixed(parts: &[&[u8]]) -> Vec<u8> {
    let mut m = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for p in parts {
        m.extend_from_slice(&(p.len() as u64).to_le_bytes());
        m.extend_from_slice(p);
    }
    m
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC (RFC 2104) over SHA-256, for a key of at most one block.
fn hmac_sha256(key: &[u8; SECRET_LEN], message: &[u8]) -> [u8; 32] {
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new().chain_update(ipad).chain_update(message).finalize();
    Sha256::new().chain_update(opad).chain_update(inner).finalize().into()
}

/// Creates `path` (`0700`) unless it exists, then checks that it is a folder the current user
/// owns and no group or other user can write.
fn ensure_private(path: &Path) -> Result<(), String> {
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    let made = match b.create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Parents are the user's to choose (a cache root under $HOME): created as usual.
            path.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| b.create(path))
        }
        Err(e) => Err(e),
    };
    if let Err(e) = made
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(format!("cannot create the cache folder {}: {e}", path.display()));
    }
    let meta = fs::metadata(path).map_err(|e| format!("cache folder {}: {e}", path.display()))?;
    if !meta.is_dir() {
        return Err(format!("cache folder {} is not a folder", path.display()));
    }
    check_owner_and_mode(path, &meta, 0o022, "folder")
}

/// Refuses a cache entry another user owns or whose mode has any of `forbidden` bits.
fn check_owner_and_mode(path: &Path, meta: &fs::Metadata, forbidden: u32, what: &str) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!(
                "cache {what} {} belongs to another user (uid {}, you are {me}): it is not used, since whoever \
                 can write a cache decides what runs; remove it, or choose another cache folder",
                path.display(),
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & forbidden != 0 {
            return Err(format!(
                "cache {what} {} can be {} by other users (mode {mode:04o}): it is not used, since whoever can \
                 write a cache decides what runs; `chmod go-rwx` it, or choose another cache folder",
                path.display(),
                if forbidden & 0o044 != 0 { "read or written" } else { "written" }
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, meta, forbidden, what);
    Ok(())
}

/// The cache's secret: read from `<dir>/key` (a regular file of the current user's, `0600` or
/// stricter, of 32 bytes), or created there atomically from the system's random source.
fn secret(dir: &Path) -> Result<[u8; SECRET_LEN], String> {
    let path = dir.join(SECRET_FILE);
    for _ in 0..3 {
        match read_secret(&path) {
            Ok(Some(s)) => return Ok(s),
            Ok(None) => create_secret(dir, &path)?,
            Err(e) => return Err(e),
        }
    }
    Err(format!("cache secret {}: could not be created", path.display()))
}

fn read_secret(path: &Path) -> Result<Option<[u8; SECRET_LEN]>, String> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cache secret {}: {e}", path.display())),
    };
    if !meta.file_type().is_file() || meta.len() != SECRET_LEN as u64 {
        return Err(format!(
            "cache secret {} is not a file of {SECRET_LEN} bytes: remove it (the cache's files are then ignored)",
            path.display()
        ));
    }
    check_owner_and_mode(path, &meta, 0o077, "secret")?;
    let mut s = [0u8; SECRET_LEN];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut s))
        .map_err(|e| format!("cache secret {}: {e}", path.display()))?;
    Ok(Some(s))
}

/// Writes a new secret under a temporary name (`0600`) and links it into place; a secret
/// another process linked first stays (and is read next).
fn create_secret(dir: &Path, path: &Path) -> Result<(), String> {
    let mut s = [0u8; SECRET_LEN];
    fs::File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut s))
        .map_err(|e| format!("cannot read /dev/urandom for the cache secret: {e}"))?;
    let tmp = crate::cache::temp_name(&dir.join(SECRET_FILE));
    let mut o = fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let written = o.open(&tmp).and_then(|mut f| f.write_all(&s).and_then(|()| f.sync_all()));
    let linked = written.and_then(|()| match fs::hard_link(&tmp, path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    });
    let _ = fs::remove_file(&tmp);
    linked.map_err(|e| format!("cannot create the cache secret {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231, test case 2 ("Jefe"), with the key zero-padded to 32 bytes (HMAC pads a short
    /// key with zeros to the block, so the result is the same).
    #[test]
    fn hmac_matches_rfc_4231() {
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex(&hmac_sha256(&key, b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}

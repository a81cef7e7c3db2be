//! Finding and reading the inputs: the spec files of the paths given (a folder is searched
//! for `*.toml`), the family files of each family folder and their templates. Every file is
//! read alike: a regular file, never through a symbolic link, of bounded size, UTF-8 (a bad
//! byte is a spec error at its line and column).

use crate::diag::{Diagnostic, Diagnostics};
use crate::family::{self, Families};
use crate::spec::SpecSource;
use crate::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest spec file read, in bytes (the bundled ones are a few KB).
pub const MAX_SPEC_BYTES: u64 = 4 << 20;

/// Spec files named by `paths`: a directory gives its `*.toml` files
/// (recursively; symbolic links are refused, to files and to directories), a
/// file gives itself (and is refused if it is a link). The result is in a canonical order (by
/// origin), whatever the order of `paths`. Only regular files are read, of at
/// most [`MAX_SPEC_BYTES`]; a file that is not UTF-8 is a spec error at the
/// line and column of its first bad byte.
pub fn read_specs(paths: &[PathBuf]) -> Result<Vec<SpecSource>, Error> {
    read_specs_except(paths, &[])
}

/// [`read_specs`], but a folder met in a walk that is one of `family_dirs` (by identity:
/// canonical paths) is not searched: it holds family files, not specs.
pub(crate) fn read_specs_except(paths: &[PathBuf], family_dirs: &[PathBuf]) -> Result<Vec<SpecSource>, Error> {
    let mut out = Vec::new();
    for path in paths {
        let io = |p: &Path, e: std::io::Error| Error::Io { path: p.to_path_buf(), message: e.to_string() };
        let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
        let files: Vec<(PathBuf, String)> = if meta.is_dir() {
            let base = dir_name(path);
            let mut found = Vec::new();
            collect_toml(path, path, family_dirs, &mut found)?;
            found.sort();
            found.into_iter().map(|(rel, p)| (p, format!("{base}/{rel}"))).collect()
        } else {
            let parent = path.parent().map(dir_name).unwrap_or_else(|| "specs".into());
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            vec![(path.clone(), format!("{parent}/{file}"))]
        };
        for (file, origin) in files {
            let text = read_spec_file(&file)?;
            let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            out.push(SpecSource { display: file.display().to_string(), origin, stem, text });
        }
    }
    // Canonical order: the generated tree must not depend on the order of
    // the paths (nor on how they are spelled, but for the tie-break).
    out.sort_by(|a, b| (&a.origin, &a.display).cmp(&(&b.origin, &b.display)));
    Ok(out)
}

/// The bundled families and the family files in `dirs`: every `*.toml` there
/// is a family file, its template beside it. Every problem of every file is
/// reported at once, with file, line, column and field.
pub fn read_families(dirs: &[PathBuf]) -> Result<Families, Error> {
    let mut defs = Vec::new();
    let mut problems = Diagnostics::default();
    for dir in dirs {
        let io = |e: std::io::Error| Error::Io { path: dir.clone(), message: e.to_string() };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let hidden = path.file_name().is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
            if path.extension().is_some_and(|e| e == "toml") && !hidden {
                files.push(path);
            }
        }
        files.sort();
        let base = dir_name(dir);
        for file in files {
            let text = read_spec_file(&file)?;
            let name = file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            let source = Arc::new(SpecSource {
                display: file.display().to_string(),
                origin: format!("{base}/{name}"),
                stem: file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
                text,
            });
            let template = |t: &str| {
                let path = dir.join(t);
                match std::fs::symlink_metadata(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => family::file::TemplateFile::Missing,
                    _ => read_spec_file(&path).map_or_else(family::file::TemplateFile::Unreadable, family::file::TemplateFile::Text),
                }
            };
            match family::file::read(source, Some(dir.clone()), template) {
                Ok(def) => defs.push(def),
                Err(d) => problems.extend(d),
            }
        }
    }
    if !problems.is_empty() {
        return Err(Error::Spec(problems));
    }
    Families::with(defs).map_err(Error::Spec)
}

/// Why a file kernelgen reads (a spec, a family file, a template, a reference) may not be a
/// symbolic link.
pub(crate) const NO_LINKS: &str = "a symbolic link, which kernelgen does not follow (a link could bring in any file of the machine): replace it with the file itself";

/// A spec file's text: a regular file (a FIFO would block, `/dev/zero` never
/// end), not a symbolic link, at most [`MAX_SPEC_BYTES`], UTF-8.
fn read_spec_file(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let fail = |message: String| Error::Io { path: path.to_path_buf(), message };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Opening a FIFO for reading waits for a writer; non-blocking, it does not. A symbolic link
    // is not opened at all (checked by the open itself, so the file cannot become one meanwhile).
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK | libc::O_NOFOLLOW);
    let file = options.open(path).map_err(|e| fail(if e.raw_os_error() == Some(libc::ELOOP) { NO_LINKS.to_string() } else { e.to_string() }))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail("not a regular file (a directory, FIFO, device or socket); a spec is a .toml file".into()));
    }
    if meta.len() > MAX_SPEC_BYTES {
        return Err(fail(format!("the file is {} bytes; a spec is at most {MAX_SPEC_BYTES} bytes", meta.len())));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file that grows while it is read stops at the limit too.
    file.take(MAX_SPEC_BYTES + 1).read_to_end(&mut bytes).map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(fail(format!("the file grew past {MAX_SPEC_BYTES} bytes while it was read")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bad = e.as_bytes()[at];
        let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
        let source = Arc::new(SpecSource {
            display: path.display().to_string(),
            origin: String::new(),
            stem: String::new(),
            text,
        });
        let mut d = Diagnostics::default();
        // The text before the bad byte is intact in the lossy copy, so the
        // line and column are those of the file.
        d.push(Diagnostic {
            source,
            span: at..at + char::REPLACEMENT_CHARACTER.len_utf8(),
            field: "(encoding)".into(),
            message: format!("the file is not UTF-8 text: byte 0x{bad:02X} cannot start or continue a character"),
            help: Some("save the file as UTF-8".into()),
        });
        Error::Spec(d)
    })
}

/// The last component of a directory path, resolving `.` and `..`, so the
/// recorded origin does not depend on the working directory.
fn dir_name(path: &Path) -> String {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolved.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "specs".into())
}

/// Every `*.toml` under `dir`, relative to `root`. Symbolic links are not
/// followed into directories (a link to a parent would never end).
fn collect_toml(root: &Path, dir: &Path, skip: &[PathBuf], out: &mut Vec<(String, PathBuf)>) -> Result<(), Error> {
    let io = |p: &Path, e: std::io::Error| Error::Io { path: p.to_path_buf(), message: e.to_string() };
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        // hidden files are no specs: an editor's lock or backup (`.#x.toml`, a link to nowhere)
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let kind = entry.file_type().map_err(|e| io(&path, e))?;
        let is_toml = path.extension().is_some_and(|e| e == "toml");
        if kind.is_dir() {
            if !std::fs::canonicalize(&path).is_ok_and(|c| skip.contains(&c)) {
                collect_toml(root, &path, skip, out)?;
            }
        } else if kind.is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            return Err(Error::Io {
                path,
                message: "a symbolic link to a directory: kernelgen does not follow these; name the directory with --specs".into(),
            });
        } else if is_toml {
            let rel = path.strip_prefix(root).expect("walk stays under root").to_string_lossy().replace('\\', "/");
            out.push((rel, path));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;

    const TINY: &str = "family = \"expert\"\n[axes]\nquant = [\"q4\"]\n[geometry.tiny]\nhidden = 256\nintermediate = 128\n";

    fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn io_message(r: Result<Vec<SpecSource>, Error>) -> String {
        match r {
            Err(Error::Io { path, message }) => format!("{}: {message}", path.display()),
            Err(e) => panic!("expected an I/O error, got {e}"),
            Ok(s) => panic!("read {} specs", s.len()),
        }
    }

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let start = std::time::Instant::now();
        let zero = io_message(read_specs(&[PathBuf::from("/dev/zero")]));
        assert!(zero.contains("not a regular file"), "{zero}");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo.toml");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            let m = io_message(read_specs(std::slice::from_ref(&fifo)));
            assert!(m.contains("fifo.toml: not a regular file"), "{m}");
            // Found in a directory walk too.
            let m = io_message(read_specs(&[dir.path().to_path_buf()]));
            assert!(m.contains("fifo.toml: not a regular file"), "{m}");
            std::fs::remove_file(&fifo).unwrap();
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        let big = std::fs::File::create(dir.path().join("big.toml")).unwrap();
        big.set_len(MAX_SPEC_BYTES + 1).unwrap();
        let m = io_message(read_specs(&[dir.path().join("big.toml")]));
        assert!(m.contains(&format!("a spec is at most {MAX_SPEC_BYTES} bytes")), "{m}");
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_to_directories_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "specs/a.toml", TINY.as_bytes());
        std::os::unix::fs::symlink("..", dir.path().join("specs/loop")).unwrap();
        let m = io_message(read_specs(&[dir.path().join("specs")]));
        assert!(m.contains("loop: a symbolic link to a directory"), "{m}");
    }

    #[test]
    fn a_spec_that_is_not_utf8_gets_the_line_and_column_of_the_first_bad_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "bad.toml", b"family = \"expert\"\n# caf\xc3\xa9 ok\ndescription = \"ab\xffcd\"\n");
        match read_specs(&[path]) {
            Err(Error::Spec(d)) => {
                assert_eq!(d.0.len(), 1);
                let h = d.0[0].headline();
                assert!(h.ends_with("bad.toml:3:18: (encoding): the file is not UTF-8 text: byte 0xFF cannot start or continue a character"), "{h}");
                assert!(d.render().contains("bad.toml:3:18"), "{}", d.render());
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("read"),
        }
    }

    #[test]
    fn the_order_of_spec_paths_does_not_matter() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "one/a.toml", TINY.as_bytes());
        let b = write(dir.path(), "two/b.toml", TINY.replace("tiny", "small").as_bytes());
        let files = |paths: &[PathBuf]| generate(read_specs(paths).unwrap()).unwrap().files;
        let forward = files(&[a.clone(), b.clone()]);
        assert_eq!(forward, files(&[b.clone(), a.clone()]));
        assert_eq!(forward, files(&[dir.path().join("two"), dir.path().join("one")]));
        assert!(forward["manifest.json"].find("one/a.toml").unwrap() < forward["manifest.json"].find("two/b.toml").unwrap());
    }
}

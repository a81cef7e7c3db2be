//! Why a command failed: one type for every command. The libraries' errors stay their own
//! types up to `main`, which prints them (exit 2); what the command line finds itself is
//! worded here. Every message reads `error: ...`, as the generator's own do.

use kernelgen::launch::LaunchError;
use kernelgen_emu::EmuError;
use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// What the command line found itself: a usage mistake, a file it names that is not
    /// what the command needs. The message without `error: `.
    Message(String),
    /// A file, folder or program the command reads, writes or runs itself; `what` names it
    /// (a path, or an option and its path).
    Io { what: String, source: std::io::Error },
    /// The generator: a spec, family file, template or output-tree problem, worded by
    /// kernelgen-codegen (locations and `error: ` included).
    Codegen(kernelgen_codegen::Error),
    /// The emulator could not start, load or run a kernel; `context` names what it was
    /// given where the emulator's message does not.
    Emu { context: Option<String>, source: EmuError },
    /// A launch the checks refused, or that failed in the backend.
    Launch(LaunchError),
    /// A limit of the Metal check met by a file (`lint`): not a problem of the file.
    NotChecked(kernelgen_emu::MetalProblem),
    /// The comparison of two generated trees (`diff`, `list`'s costs).
    Review(String),
    /// `--filter` is not a glob.
    Filter { filter: String, source: globset::Error },
    /// git failed (`diff REV`): the command and what git said.
    Git { command: String, stderr: String },
    /// An error and a line that says what to do instead.
    Hint { error: Box<Error>, hint: &'static str },
    /// Several errors (`lint`: one per file that could not be checked), one a line.
    Several(Vec<Error>),
}

impl Error {
    /// The CLI's own message (without `error: `).
    pub fn msg(message: impl Into<String>) -> Self {
        Error::Message(message.into())
    }

    /// An I/O error of `what` (a path, or an option and its path).
    pub fn io(what: impl fmt::Display, source: std::io::Error) -> Self {
        Error::Io { what: what.to_string(), source }
    }

    /// An emulator error about `context` (a buffer), which its message does not name.
    pub fn emu(context: impl Into<String>, source: EmuError) -> Self {
        Error::Emu { context: Some(context.into()), source }
    }

    /// This error, then `hint` on the next line.
    pub fn with_hint(self, hint: &'static str) -> Self {
        Error::Hint { error: Box::new(self), hint }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Message(m) | Error::Review(m) => write!(f, "error: {m}"),
            Error::Io { what, source } => write!(f, "error: {what}: {source}"),
            Error::Codegen(e) => write!(f, "{e}"),
            Error::Emu { context: None, source } => write!(f, "error: {source}"),
            Error::Emu { context: Some(c), source } => write!(f, "error: {c}: {source}"),
            Error::Launch(e) => write!(f, "error: {e}"),
            Error::NotChecked(p) => write!(f, "error: {p}"),
            Error::Filter { filter, source } => write!(f, "error: --filter {filter}: {source}"),
            Error::Git { command, stderr } => write!(f, "error: git {command}: {stderr}"),
            Error::Hint { error, hint } => write!(f, "{error}\n{hint}"),
            Error::Several(errors) => {
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Codegen(e) => Some(e),
            Error::Emu { source, .. } => Some(source),
            Error::Launch(e) => Some(e),
            Error::Filter { source, .. } => Some(source),
            Error::Hint { error, .. } => Some(error.as_ref()),
            Error::Message(_) | Error::Review(_) | Error::NotChecked(_) | Error::Git { .. } | Error::Several(_) => None,
        }
    }
}

impl From<kernelgen_codegen::Error> for Error {
    fn from(e: kernelgen_codegen::Error) -> Self {
        Error::Codegen(e)
    }
}

impl From<LaunchError> for Error {
    fn from(e: LaunchError) -> Self {
        Error::Launch(e)
    }
}

impl From<EmuError> for Error {
    fn from(e: EmuError) -> Self {
        Error::Emu { context: None, source: e }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The libraries' errors reach `main` as their own types, worded as they word themselves.
    #[test]
    fn a_library_error_keeps_its_type_and_its_words() {
        let dir = std::env::temp_dir().join(format!("kernelgen-cli-error-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bad.toml"), "family = \"nope\"\n").unwrap();
        let args = crate::SpecArgs { specs: vec![dir.join("bad.toml")], families: vec![] };
        let e = crate::codegen_cmds::run_pipeline(&args).err().expect("an unknown family is an error");
        std::fs::remove_dir_all(&dir).unwrap();
        let Error::Codegen(kernelgen_codegen::Error::Spec(d)) = &e else { panic!("{e:?}") };
        assert_eq!(e.to_string(), d.to_string());
        assert!(e.to_string().starts_with("error: family: unknown family \"nope\"") && e.to_string().contains("bad.toml:1:10"), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn each_message_reads_as_before() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(Error::msg("no kernel `x` in the specs").to_string(), "error: no kernel `x` in the specs");
        assert_eq!(Error::io("--specs s", io()).to_string(), format!("error: --specs s: {}", io()));
        let git = Error::Git { command: "rev-parse".into(), stderr: "fatal: no".into() };
        assert_eq!(git.with_hint("(a hint)").to_string(), "error: git rev-parse: fatal: no\n(a hint)");
        let several = Error::Several(vec![Error::msg("a"), Error::io("b", io())]);
        assert_eq!(several.to_string(), format!("error: a\nerror: b: {}", io()));
    }
}

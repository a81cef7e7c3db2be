//! `kernelgen lint`: the Metal check every emulator load runs (kernelgen-msl), on any
//! `.metal` file. Prints every problem as `file.metal:line:col: message` (stdout); exit 1 if
//! there were any, 0 if none, 2 on usage errors, errors files, files the check cannot check
//! (one of its limits: size, nesting, time; not counted as problems) or without clang.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use crate::out::outln;
use kernelgen_emu::{EmuOptions, Emulator};

pub fn lint(files: &[PathBuf], include_dirs: &[PathBuf], defines: &[String]) -> Result<ExitCode, Error> {
    let defines: Vec<(String, Option<String>)> = defines.iter().map(|d| parse_define(d)).collect::<Result<_, _>>()?;
    let checker = Emulator::metal_checker(&EmuOptions::default())?;
    let mut problems = 0usize;
    let mut errors = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let source = match std::fs::read_to_string(f) {
            Ok(s) => s,
            Err(e) => {
                errors.push(Error::io(&name, e));
                continue;
            }
        };
        if let Err(found) = checker.check_with(&source, &name, include_dirs, &defines) {
            // a limit of the check is no problem of the file: an error, as an errors file is
            let (limits, found): (Vec<_>, Vec<_>) = found.into_iter().partition(|p| p.is_not_checked());
            errors.extend(limits.into_iter().map(Error::NotChecked));
            problems += found.len();
            for p in found {
                outln!("{p}");
            }
        }
    }
    let n = files.len();
    if !errors.is_empty() {
        if problems > 0 {
            outln!("lint: {problems} problem{} Metal would reject, in the files the check could read", plural(problems));
        }
        return Err(Error::Several(errors));
    }
    if problems > 0 {
        outln!("lint: {problems} problem{} Metal would reject, in {n} file{}", plural(problems), plural(n));
        Ok(ExitCode::from(1))
    } else {
        outln!("lint: {n} file{} ok", plural(n));
        Ok(ExitCode::SUCCESS)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `NAME` or `NAME=VALUE`, NAME an identifier (a `-D` of `lint` and `emu`).
pub(crate) fn parse_define(d: &str) -> Result<(String, Option<String>), Error> {
    let (name, value) = match d.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (d, None),
    };
    let ident = name.chars().next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
    if !ident {
        return Err(Error::msg(format!("-D {d}: expected NAME or NAME=VALUE, NAME an identifier")));
    }
    Ok((name.to_string(), value))
}

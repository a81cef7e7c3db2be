//! The generator's tests: every file in this folder is a module of one test binary (`--test
//! integration`), so that they link once and their tests run side by side on every core; a new
//! file is declared here (a test of the CLI's checks that none is missing).

mod bad_families;
mod freshness;
mod injection;
mod limits;
mod rust_names;
mod snapshots;

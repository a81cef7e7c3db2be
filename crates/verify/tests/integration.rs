//! The verify library's tests: every file in this folder is a module of one test binary
//! (`--test integration`), so that they link once; a new file is declared here (a test of the
//! CLI's checks that none is missing).

mod affine_fma;
mod backends;
mod check;
mod cuda;
mod declarations;
mod expert_long_rows;

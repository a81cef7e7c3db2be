//! The Metal check's tests: every file in this folder is a module of one test binary (`--test
//! integration`), so that they link once and their tests run side by side on every core; a new
//! file is declared here (a test of the CLI's checks that none is missing).

mod common;
mod api;
mod cache;
mod corpus;
mod deep;
mod generated;
mod includes;
mod mlx_headers;
mod real_world;
mod seeds;

//! troupe-results's integration tests, as one test binary: each file is a module (`cargo test -p
//! troupe-results --test suite <file>::`); one binary compiles and links once.

mod browser;
mod report;

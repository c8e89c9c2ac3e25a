//! troupe-bench's integration tests, as one test binary: each file is a module (`cargo test -p
//! troupe-bench --test suite <file>::`); one binary compiles and links once.

mod compare;
mod quick;

//! The example service's tests, as one test binary (`cargo test -p troupe-service --test
//! service <file>::`): over loopback in this process (`http.rs`), and the binary as an operator
//! runs it (`trace_stdout.rs`).

mod http;
mod trace_stdout;

/// `--version` answers, as every binary of the workspace does.
#[test]
fn the_binary_says_its_version() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_troupe-service"))
        .arg("--version")
        .output()
        .expect("start troupe-service");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        concat!("troupe-service ", env!("CARGO_PKG_VERSION"))
    );
}

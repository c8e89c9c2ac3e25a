//! `troupe-service --trace-stdout` as an operator runs it: one request becomes one trace whose
//! spans OpenTelemetry's stdout exporter prints, from the request through the rate limiter,
//! the router's worker and the worker's piped step.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A span as the stdout exporter prints it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: String,
}

/// The spans in the exporter's text: each `Name`, `TraceId`, `SpanId`, `ParentSpanId` block.
fn spans(text: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut current: Option<Span> = None;
    for line in text.lines() {
        // The scope's name is indented twice; the span's once.
        let Some(rest) = line.strip_prefix('\t') else {
            continue;
        };
        if rest.starts_with('\t') {
            continue;
        }
        let Some((key, value)) = rest.split_once(':') else {
            continue;
        };
        let value = value.trim().to_owned();
        match key.trim() {
            "Name" => {
                out.extend(current.take());
                current = Some(Span {
                    name: value,
                    trace: String::new(),
                    id: String::new(),
                    parent: String::new(),
                });
            }
            "TraceId" => current.iter_mut().for_each(|s| s.trace = value.clone()),
            "SpanId" => current.iter_mut().for_each(|s| s.id = value.clone()),
            "ParentSpanId" => current.iter_mut().for_each(|s| s.parent = value.clone()),
            _ => {}
        }
    }
    out.extend(current);
    out
}

#[test]
fn one_request_is_one_trace_through_every_actor_it_touches() {
    let mut service = Command::new(env!("CARGO_BIN_EXE_troupe-service"))
        .args(["--port", "0", "--trace-stdout"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start troupe-service");
    let mut stdout = BufReader::new(service.stdout.take().expect("its stdout"));
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "no address printed"
        );
        if let Some(addr) = line.trim().strip_prefix("listening on http://") {
            break addr.to_owned();
        }
    };
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    use std::io::Write;
    write!(
        stream,
        "GET /jobs/7 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    // Ctrl-C: a graceful stop, which flushes the spans.
    let status = Command::new("sh")
        .args(["-c", &format!("kill -INT {}", service.id())])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read the rest");
    while service.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the service did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let spans = spans(&rest);
    let request = spans
        .iter()
        .find(|s| s.name == "GET /jobs/7")
        .unwrap_or_else(|| panic!("no request span in {spans:?}"));
    assert_eq!(request.parent, "None (root span)");
    let of = |name: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| s.name == name && s.trace == request.trace)
            .collect()
    };
    let acquire = of("RateLimiter Acquire");
    let square = of("Worker Square");
    let computed = of("Worker Computed");
    assert_eq!(
        (acquire.len(), square.len(), computed.len()),
        (1, 1, 1),
        "{spans:#?}"
    );
    assert_eq!(acquire[0].parent, request.id);
    assert_eq!(square[0].parent, request.id);
    // The piped step's result is handled in the span of the handler that piped it.
    assert_eq!(computed[0].parent, square[0].id);
}

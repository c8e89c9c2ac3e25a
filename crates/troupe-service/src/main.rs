//! Runs the example service: `cargo run --release -p troupe-service -- --port 3000`, then
//! `curl -X POST localhost:3000/sessions/ada`, `curl localhost:3000/jobs/12`,
//! `curl 'localhost:3000/flaky?fail=true'`. Ctrl-C stops it gracefully.
//!
//! `--console 127.0.0.1:0` also serves the live console of its actors (`troupe-console`) on
//! that loopback address, and prints its URL. `--metrics` serves the actors' metrics in the
//! Prometheus text format at `GET /metrics`.

use std::net::SocketAddr;

use anyhow::{bail, Context as _, Result};
use troupe::System;
use troupe_console::Console;
use troupe_service::{serve, AppState, Settings};

/// What the command line asks for.
struct Options {
    port: u16,
    /// Where to serve the console, if anywhere.
    console: Option<SocketAddr>,
    /// Serve `GET /metrics`.
    metrics: bool,
    /// Trace every request and message, printing the spans.
    trace_stdout: bool,
}

fn options_from_args() -> Result<Options> {
    let mut args = std::env::args().skip(1);
    let mut port = 3000u16;
    let mut console = None;
    let mut metrics = false;
    let mut trace_stdout = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                let value = args
                    .next()
                    .context("--port needs a value, e.g. --port 3000")?;
                port = value
                    .parse()
                    .with_context(|| format!("--port must be 0 to 65535, not `{value}`"))?;
            }
            "--console" => {
                let value = args
                    .next()
                    .context("--console needs an address, e.g. --console 127.0.0.1:0")?;
                let addr = troupe_console::loopback_addr(&value)
                    .map_err(|error| anyhow::anyhow!("--console: {error}"))?;
                console = Some(addr);
            }
            "--metrics" => metrics = true,
            "--trace-stdout" => trace_stdout = true,
            "-V" | "--version" => {
                println!("troupe-service {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "-h" | "--help" => {
                println!(
                    "troupe-service [--port PORT] [--console ADDR] [--metrics] [--trace-stdout]"
                );
                println!(
                    "  --port PORT     serve on 127.0.0.1:PORT (default 3000; 0 picks a free port)"
                );
                println!("  --console ADDR  also serve the live console of the actors on ADDR, a loopback");
                println!("                  address such as 127.0.0.1:0 (0 picks a free port)");
                println!(
                    "  --metrics       serve the actors' metrics at GET /metrics (Prometheus text)"
                );
                println!("  --trace-stdout  trace every request and message, printing each finished span");
                println!("  -V, --version   print the version");
                std::process::exit(0);
            }
            other => bail!("unknown option `{other}`; try --help"),
        }
    }
    Ok(Options {
        port,
        console,
        metrics,
        trace_stdout,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let Options {
        port,
        console,
        metrics,
        trace_stdout,
    } = options_from_args()?;
    let mut builder = System::builder().tokio_handle(tokio::runtime::Handle::current());
    if console.is_some() || metrics {
        // The console and the metrics read what an observed system keeps of its actors.
        builder = builder.observe();
    }
    let tracing = if trace_stdout {
        builder = builder.trace_messages();
        Some(install_stdout_tracing()?)
    } else {
        None
    };
    let prometheus = if metrics {
        Some(
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .install_recorder()
                .context("installing the Prometheus recorder")?,
        )
    } else {
        None
    };
    let system = builder.build().context("starting the actor system")?;
    let settings = Settings::default();
    let mut state = AppState::new(system.clone(), &settings);
    if let Some(prometheus) = prometheus {
        state = state.with_prometheus(prometheus);
    }
    let console = match console {
        Some(addr) => {
            let console = Console::serve(system, addr).context("starting the console")?;
            println!("console on {}", console.url());
            Some(console)
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("listening on 127.0.0.1:{port}"))?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, state, settings.drain_deadline, async {
        let _ = tokio::signal::ctrl_c().await;
        println!("shutting down");
    })
    .await
    .context("serving")?;
    if let Some(console) = console {
        console.shutdown().context("stopping the console")?;
    }
    if let Some(provider) = tracing {
        provider.shutdown().context("flushing the spans")?;
    }
    Ok(())
}

/// Sends every `tracing` span (the requests', and each message's: `trace_messages`) through
/// OpenTelemetry to its stdout exporter, which prints each span as it ends.
fn install_stdout_tracing() -> Result<opentelemetry_sdk::trace::SdkTracerProvider> {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("troupe-service"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .context("installing the tracing subscriber")?;
    Ok(provider)
}

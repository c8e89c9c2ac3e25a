//! Runs the example service: `cargo run --release -p troupe-service -- --port 3000`, then
//! `curl -X POST localhost:3000/sessions/ada`, `curl localhost:3000/jobs/12`,
//! `curl 'localhost:3000/flaky?fail=true'`. Ctrl-C stops it gracefully.

use anyhow::{bail, Context as _, Result};
use troupe::System;
use troupe_service::{serve, AppState, Settings};

fn port_from_args() -> Result<u16> {
    let mut args = std::env::args().skip(1);
    let mut port = 3000u16;
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
            "-h" | "--help" => {
                println!("troupe-service [--port PORT]   (default 3000, on 127.0.0.1; 0 picks a free port)");
                std::process::exit(0);
            }
            other => bail!("unknown option `{other}`; try --help"),
        }
    }
    Ok(port)
}

#[tokio::main]
async fn main() -> Result<()> {
    let port = port_from_args()?;
    let system = System::builder()
        .tokio_handle(tokio::runtime::Handle::current())
        .build()
        .context("starting the actor system")?;
    let settings = Settings::default();
    let state = AppState::new(system, &settings);
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
    Ok(())
}

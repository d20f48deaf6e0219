//! `ponder`: the server binary. Parses the command line, binds the driver and HTTP ports and
//! runs the server library (`server::run`) until SIGINT/SIGTERM, then exits once the
//! storage is flushed.

use std::process::ExitCode;

use clap::Parser;
use server::config::{Cli, Command, ServeArgs};
use server::Error;
use tokio::net::TcpListener;

#[global_allocator]
static GLOBAL: server::alloc::Counting = server::alloc::Counting;

fn main() -> ExitCode {
    // Values that are views of the engine's buffers are charged to the queries holding
    // them, as copies would be (`storage::accounting`).
    storage::accounting::set_view_charge(server::alloc::charge_view);
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(a)) => a,
        None => cli.serve,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Binds the driver port (and the HTTP admin port unless `--no-http-admin`) and serves
/// until a termination signal.
async fn serve(args: ServeArgs) -> Result<(), Error> {
    let addr = args.bind_addr()?;
    let port = args.driver_port()?;
    let listener = TcpListener::bind((addr, port))
        .await
        .map_err(|source| Error::Listen {
            addr: format!("{addr}:{port}"),
            source,
        })?;
    let http = if args.no_http_admin {
        None
    } else {
        let addr = args.http_bind_addr()?;
        let port = args.http_port()?;
        Some(
            TcpListener::bind((addr, port))
                .await
                .map_err(|source| Error::Listen {
                    addr: format!("{addr}:{port} (HTTP admin)"),
                    source,
                })?,
        )
    };
    server::run_with_http(listener, http, args.config(), terminated()).await
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn terminated() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

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
    server::alloc::configure();
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
    // Refused before anything is bound: one or two of the three TLS files.
    let tls = args.cluster_tls()?;
    let cluster_port = args.cluster_port()?;
    let cluster = match TcpListener::bind((addr, cluster_port)).await {
        Ok(l) => Some(l),
        // A server alone runs as before without its cluster port (several servers on one
        // machine all default to 29015); one meant to be clustered cannot.
        Err(e) if args.join.is_empty() && tls.is_none() => {
            eprintln!(
                "warning: not serving the cluster port: cannot listen on {addr}:{cluster_port}: {e}"
            );
            None
        }
        Err(source) => {
            return Err(Error::Listen {
                addr: format!("{addr}:{cluster_port} (cluster port)"),
                source,
            })
        }
    };
    server::run_full(listener, http, cluster, args.config(), terminated()).await
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

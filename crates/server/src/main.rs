//! `ponder`: the server binary. Parses the command line, opens storage and the catalog,
//! and serves driver connections until SIGINT/SIGTERM, then flushes and exits.

mod config;
mod conn;
mod exec;
mod principal;
mod session;
mod state;
mod tls;
mod wire;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::config::{Cli, Command, ServeArgs};
use crate::state::ServerState;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
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

fn log(args: &ServeArgs, msg: &str) {
    let line = format!("{msg}\n");
    match &args.log_file {
        Some(p) => {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
        None => eprint!("{line}"),
    }
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let addr = args.bind_addr()?;
    let port = args.driver_port()?;
    std::fs::create_dir_all(&args.directory).map_err(|e| {
        format!(
            "cannot create data directory {}: {e}",
            args.directory.display()
        )
    })?;
    // --cache-size is split: half for the engine's block cache, half for the shards'
    // caches of decoded documents in front of it (this server's store::CacheBudget).
    let cache_bytes = args.cache_size.saturating_mul(1 << 20);
    let doc_cache = store::CacheBudget::new(usize::try_from(cache_bytes / 2).unwrap_or(usize::MAX));
    let fjall = storage::Fjall::open(&args.directory.join("data"), cache_bytes - cache_bytes / 2)
        .map_err(|e| format!("cannot open storage: {e}"))?;
    fjall.set_min_free_bytes(args.min_free_disk_mb.saturating_mul(1 << 20));
    let engine: Arc<dyn storage::Engine> = Arc::new(fjall);
    let cluster = cluster::Cluster::open_with_options(
        engine.clone(),
        cluster::ClusterOptions {
            server_name: args.server_name.clone(),
            initial_password: args.initial_password.clone().unwrap_or_default(),
            doc_cache,
        },
    )
    .map_err(|e| e.to_string())?;
    let tls = match (&args.driver_tls_cert, &args.driver_tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    cluster.set_soft_flush_interval(std::time::Duration::from_millis(args.soft_flush_ms));
    let state = Arc::new(ServerState {
        cluster: cluster.clone(),
        server_id: cluster.server_id().to_string(),
        server_name: args.server_name.clone(),
        pool: Arc::new(
            exec::Pool::new(args.eval_threads())
                .map_err(|e| format!("cannot start evaluation threads: {e}"))?,
        ),
    });
    let listener = TcpListener::bind((addr, port))
        .await
        .map_err(|e| format!("cannot listen on {addr}:{port}: {e}"))?;
    let listening = format!(
        "Ponder {} listening for client driver connections on {addr}:{port}{} (data in {})",
        env!("CARGO_PKG_VERSION"),
        if tls.is_some() { " with TLS" } else { "" },
        args.directory.display()
    );
    log(&args, &listening);
    cluster.log("notice", &listening);
    cluster.set_server_info(cluster::system::ServerInfo {
        reql_port: port,
        http_port: args.http_port.saturating_add(args.port_offset),
        cluster_port: args.cluster_port.saturating_add(args.port_offset),
        hostname: std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into()),
        argv: std::env::args().collect(),
        cache_size_mb: args.cache_size as f64,
    });
    let limit = Arc::new(Semaphore::new(args.max_connections));
    let shutdown = async {
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
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let st = state.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => conn::serve(stream, st).await,
                        Some(acceptor) => {
                            let _ = stream.set_nodelay(true);
                            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                            if let Ok(s) = acceptor.accept(stream).await {
                                conn::serve_stream(s, peer, st).await;
                            }
                        }
                    }
                    drop(permit);
                });
            }
        }
    }
    log(&args, "Shutting down: flushing storage.");
    cluster.shutdown();
    Ok(())
}

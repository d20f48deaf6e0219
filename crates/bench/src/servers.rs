//! `--start`: starting each server under test on loopback with a throw-away
//! data directory, and stopping it again (by its pid) when the run ends.
//!
//! - Ponder: `ponder serve --directory D --driver-port P` (HTTP admin on
//!   `P + 1`, cluster port `P + 2`).
//! - PostgreSQL: Debian's `initdb` and `postgres` from the newest
//!   `/usr/lib/postgresql/*/bin`, run as the `postgres` user when we are
//!   root (PostgreSQL refuses to run as root); trust authentication for the
//!   user `bench`, listening on 127.0.0.1 only, with `synchronous_commit`
//!   and `fsync` on unless told otherwise.
//! - Redis: `redis-server` with `appendonly yes` and the requested
//!   `appendfsync` (`always` by default: every write is on disk before the
//!   reply, the analogue of hard durability), snapshots off.
//!
//! A [`Server`] kills its process and removes its directory when dropped,
//! so an early error does not leave servers behind.

use std::net::TcpStream;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::targets::SystemKind;

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Errors starting a server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A program could not be run.
    #[error("running {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A step failed.
    #[error("{0}")]
    Failed(String),
}

/// Settings of servers started by the benchmark.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// The `ponder` binary.
    pub ponder_bin: PathBuf,
    /// PostgreSQL's `synchronous_commit` (`on` for hard durability).
    pub pg_synchronous_commit: String,
    /// PostgreSQL's `max_connections`.
    pub pg_max_connections: u32,
    /// PostgreSQL's `shared_buffers`.
    pub pg_shared_buffers: String,
    /// Redis's `appendfsync` (`always`, `everysec` or `no`).
    pub redis_appendfsync: String,
    /// Extra arguments for `ponder serve`.
    pub ponder_args: Vec<String>,
}

/// A server started by the benchmark.
pub struct Server {
    /// Which system.
    pub kind: SystemKind,
    /// Its driver/client port on 127.0.0.1.
    pub port: u16,
    /// The version its binary reports.
    pub version: String,
    child: Option<Child>,
    dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("kind", &self.kind)
            .field("port", &self.port)
            .field("pid", &self.pid())
            .finish()
    }
}

impl Server {
    /// The server's (root) process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The data directory.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(tempfile::TempDir::path)
    }

    /// Stops the server (SIGINT: PostgreSQL's fast shutdown, a clean stop
    /// for the others; SIGKILL after 20 s) and deletes its directory.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().to_string();
            let _ = Command::new("kill").args(["-INT", &pid]).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(100))
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(cmd: &mut Command, program: &str) -> Result<Child, StartError> {
    cmd.spawn().map_err(|source| StartError::Spawn {
        program: program.to_owned(),
        source,
    })
}

/// Runs a command to completion; its stdout on success.
fn run(cmd: &mut Command, program: &str) -> Result<String, StartError> {
    let out = cmd.output().map_err(|source| StartError::Spawn {
        program: program.to_owned(),
        source,
    })?;
    if !out.status.success() {
        return Err(StartError::Failed(format!(
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn wait_listening(port: u16, child: &mut Child, what: &str) -> Result<(), StartError> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(StartError::Failed(format!(
                "{what} exited at start: {status}"
            )));
        }
        if Instant::now() > deadline {
            return Err(StartError::Failed(format!(
                "{what} did not listen on 127.0.0.1:{port} within {START_TIMEOUT:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn temp_dir(kind: SystemKind) -> Result<tempfile::TempDir, StartError> {
    tempfile::Builder::new()
        .prefix(&format!("ponder-bench-{}-", kind.name()))
        .tempdir()
        .map_err(|e| StartError::Failed(format!("creating a temporary directory: {e}")))
}

/// Starts `kind` on `port` with a fresh directory.
pub fn start(kind: SystemKind, port: u16, opts: &StartOptions) -> Result<Server, StartError> {
    // Readiness is "the port accepts connections": with another process already
    // listening there, the benchmark would measure that process instead.
    if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        return Err(StartError::Failed(format!(
            "127.0.0.1:{port} is already in use, so {} cannot be started there \
             (stop what listens there, or choose another port: --ponder-port, --postgres-port, \
             --redis-port)",
            kind.name()
        )));
    }
    match kind {
        SystemKind::Ponder => start_ponder(port, opts),
        SystemKind::Postgres => start_postgres(port, opts),
        SystemKind::Redis => start_redis(port, opts),
    }
}

fn start_ponder(port: u16, opts: &StartOptions) -> Result<Server, StartError> {
    let bin = opts.ponder_bin.display().to_string();
    let version = run(Command::new(&opts.ponder_bin).arg("--version"), &bin)?;
    let dir = temp_dir(SystemKind::Ponder)?;
    let data = dir.path().join("data");
    let log = std::fs::File::create(dir.path().join("ponder.log"))
        .map_err(|e| StartError::Failed(format!("creating the log: {e}")))?;
    let mut child = spawn(
        Command::new(&opts.ponder_bin)
            .arg("serve")
            .arg("--directory")
            .arg(&data)
            .args(["--bind", "127.0.0.1"])
            .args(["--driver-port", &port.to_string()])
            .args(["--http-port", &(port.saturating_add(1)).to_string()])
            .args(["--cluster-port", &(port.saturating_add(2)).to_string()])
            .args(&opts.ponder_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log),
        &bin,
    )?;
    let mut server = Server {
        kind: SystemKind::Ponder,
        port,
        version,
        child: None,
        dir: Some(dir),
    };
    let ready = wait_listening(port, &mut child, "ponder");
    server.child = Some(child);
    ready.map(|()| server)
}

/// The newest `/usr/lib/postgresql/<v>/bin`.
pub fn postgres_bin_dir() -> Result<PathBuf, StartError> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            StartError::Failed(format!(
                "/usr/lib/postgresql: {e} (run crates/bench/scripts/install-peers.sh)"
            ))
        })?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop()
        .map(|(_, b)| b)
        .ok_or_else(|| StartError::Failed("no PostgreSQL under /usr/lib/postgresql".into()))
}

/// `(uid, gid)` of a user from /etc/passwd.
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.first() == Some(&name) {
            Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
        } else {
            None
        }
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn start_postgres(port: u16, opts: &StartOptions) -> Result<Server, StartError> {
    let bin = postgres_bin_dir()?;
    let postgres = bin.join("postgres");
    let version = run(Command::new(&postgres).arg("--version"), "postgres")?;
    let dir = temp_dir(SystemKind::Postgres)?;
    let as_user = if is_root() {
        let ids = user_ids("postgres").ok_or_else(|| {
            StartError::Failed("running as root and there is no `postgres` user".into())
        })?;
        chown(dir.path(), Some(ids.0), Some(ids.1))
            .map_err(|e| StartError::Failed(format!("chown {}: {e}", dir.path().display())))?;
        Some(ids)
    } else {
        None
    };
    let data = dir.path().join("data");
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", "bench", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .current_dir(dir.path());
    if let Some((uid, gid)) = as_user {
        initdb.uid(uid).gid(gid);
    }
    run(&mut initdb, "initdb")?;
    let log = std::fs::File::create(dir.path().join("postgres.log"))
        .map_err(|e| StartError::Failed(format!("creating the log: {e}")))?;
    let mut cmd = Command::new(&postgres);
    cmd.arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string()])
        .arg("-k")
        .arg(dir.path())
        .args(["-c", "listen_addresses=127.0.0.1"])
        .args([
            "-c",
            &format!("synchronous_commit={}", opts.pg_synchronous_commit),
        ])
        .args(["-c", "fsync=on"])
        .args([
            "-c",
            &format!("max_connections={}", opts.pg_max_connections),
        ])
        .args(["-c", &format!("shared_buffers={}", opts.pg_shared_buffers)])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    if let Some((uid, gid)) = as_user {
        cmd.uid(uid).gid(gid);
    }
    let mut child = spawn(&mut cmd, "postgres")?;
    let mut server = Server {
        kind: SystemKind::Postgres,
        port,
        version,
        child: None,
        dir: Some(dir),
    };
    let ready = wait_listening(port, &mut child, "postgres");
    server.child = Some(child);
    ready.map(|()| server)
}

fn start_redis(port: u16, opts: &StartOptions) -> Result<Server, StartError> {
    let version = run(
        Command::new("redis-server").arg("--version"),
        "redis-server",
    )?;
    let dir = temp_dir(SystemKind::Redis)?;
    let log = std::fs::File::create(dir.path().join("redis.log"))
        .map_err(|e| StartError::Failed(format!("creating the log: {e}")))?;
    let mut child = spawn(
        Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir.path())
            .args(["--appendonly", "yes"])
            .args(["--appendfsync", &opts.redis_appendfsync])
            .args(["--save", ""])
            .args(["--protected-mode", "no"])
            .args(["--daemonize", "no"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null()),
        "redis-server",
    )?;
    let mut server = Server {
        kind: SystemKind::Redis,
        port,
        version,
        child: None,
        dir: Some(dir),
    };
    let ready = wait_listening(port, &mut child, "redis-server");
    server.child = Some(child);
    ready.map(|()| server)
}

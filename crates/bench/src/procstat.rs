//! Server resource use from `/proc`: CPU time and resident memory of a
//! process *tree* (PostgreSQL runs one process per connection), and pinning
//! that tree to cores with `taskset` for the cores sweep.
//!
//! CPU time is `utime + stime` of every live process in the tree plus the
//! root's `cutime + cstime` (children that already exited and were reaped).
//! Memory is the sum of each process's proportional set size (`Pss` from
//! `smaps_rollup`, else `VmRSS`) over the tree, sampled every 200 ms, so
//! PostgreSQL's shared buffers count once, not once per backend.

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` times (Linux's `USER_HZ`).
const TICKS_PER_SEC: f64 = 100.0;
/// How often the memory sampler looks.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// `(pid, ppid, utime + stime, cutime + cstime)` of every process.
fn all_stats() -> Vec<(u32, u32, u64, u64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(s) = stat(pid) {
            out.push(s);
        }
    }
    out
}

/// Parses `/proc/<pid>/stat` (the command name may contain spaces: fields
/// are counted after its closing parenthesis).
fn stat(pid: u32) -> Option<(u32, u32, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let ppid = u32::try_from(num(1)?).ok()?;
    Some((pid, ppid, num(11)? + num(12)?, num(13)? + num(14)?))
}

/// `root` and all its descendants.
pub fn tree(root: u32) -> Vec<u32> {
    let stats = all_stats();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, ppid, _, _) in &stats {
        children.entry(*ppid).or_default().push(*pid);
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied());
        }
        i += 1;
    }
    out
}

/// CPU seconds used so far by the tree under `root` (see the module note).
pub fn cpu_secs(root: u32) -> f64 {
    cpu_secs_of(root, true)
}

/// CPU seconds of `root` alone (`tree == false`: its threads, not its
/// children) or of its whole tree.
pub fn cpu_secs_of(root: u32, tree_too: bool) -> f64 {
    let pids = if tree_too { tree(root) } else { vec![root] };
    let mut ticks = 0u64;
    for pid in &pids {
        if let Some((_, _, own, reaped)) = stat(*pid) {
            ticks += own;
            if *pid == root && tree_too {
                ticks += reaped;
            }
        }
    }
    ticks as f64 / TICKS_PER_SEC
}

/// The first `name:` line's number in a `/proc` key-value file.
fn proc_kb(path: &str, name: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    })
}

/// Memory of one process in KiB (0 if gone): its proportional set size
/// (shared pages divided among the processes sharing them, so a tree's sum
/// counts PostgreSQL's shared buffers once), or `VmRSS` where `Pss` is not
/// readable.
fn rss_kb(pid: u32) -> u64 {
    proc_kb(&format!("/proc/{pid}/smaps_rollup"), "Pss:")
        .or_else(|| proc_kb(&format!("/proc/{pid}/status"), "VmRSS:"))
        .unwrap_or(0)
}

/// Sum of resident memory over the tree under `root`, KiB.
pub fn tree_rss_kb(root: u32) -> u64 {
    tree(root).into_iter().map(rss_kb).sum()
}

/// Samples the tree's memory in the background until stopped.
pub struct MemorySampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl MemorySampler {
    /// Starts sampling the tree under `root`.
    pub fn start(root: u32) -> Self {
        Self::start_of(root, true)
    }

    /// Starts sampling `root` alone, or its whole tree.
    pub fn start_of(root: u32, tree_too: bool) -> Self {
        let measure = move || {
            if tree_too {
                tree_rss_kb(root)
            } else {
                rss_kb(root)
            }
        };
        let peak = Arc::new(AtomicU64::new(measure()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    p.fetch_max(measure(), Ordering::Relaxed);
                    std::thread::sleep(SAMPLE_EVERY);
                }
            })
            .ok();
        Self { peak, stop, handle }
    }

    /// Stops and returns the peak seen, KiB.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Pins every thread of every process in the tree under `root` to CPUs
/// `0..cores` (`taskset -a -p -c`). Processes forked later inherit it.
pub fn pin_tree(root: u32, cores: usize) -> Result<(), String> {
    let list = format!("0-{}", cores.saturating_sub(1));
    for pid in tree(root) {
        let out = Command::new("taskset")
            .args(["-a", "-p", "-c", &list, &pid.to_string()])
            .output()
            .map_err(|e| format!("taskset: {e} (install util-linux)"))?;
        // A process may exit between listing and pinning; only the root matters.
        if !out.status.success() && pid == root {
            return Err(format!(
                "taskset -a -p -c {list} {pid}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_visible() {
        let me = std::process::id();
        assert!(tree(me).contains(&me));
        // Burn a little CPU so the counter is non-zero.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(cpu_secs(me) >= 0.0);
        assert!(tree_rss_kb(me) > 0);
        let s = MemorySampler::start(me);
        assert!(s.finish() > 0);
        assert_eq!(cpu_secs(u32::MAX), 0.0);
    }
}

//! End-to-end checks: every engine runs, counts and flushes what it should,
//! several workloads run together, and the binary reads workloads from standard
//! input, refuses destructive writes, and writes JSON and a PNG.

use std::io::Write;
use std::process::{Command, Stdio};

use iobench::runner::{run, RunOptions};
use iobench::target::{prepare, Target};
use iobench::workload::parse_line;

fn target(dir: &tempfile::TempDir, size: u64) -> Target {
    prepare(&dir.path().join("t"), Some(size), true, false).unwrap()
}

fn run_one(t: &Target, line: &str) -> iobench::runner::WorkloadResult {
    let w = parse_line(line, 0).unwrap();
    let mut r = run(t, &[w], RunOptions::default()).unwrap();
    r.pop().unwrap()
}

fn uring_available() -> bool {
    match iobench::engine::uring::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

#[test]
fn every_synchronous_engine_does_exactly_the_requested_ops() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(&dir, 4 << 20);
    for engine in ["pread", "lseek", "mmap"] {
        let r = run_one(
            &t,
            &format!("engine={engine} op=mix:50 ops=1000 threads=3 fd=shared"),
        );
        assert_eq!(r.rec.ops(), 1000, "{engine}");
        assert!(
            r.rec.reads.len() > 350 && r.rec.writes.len() > 350,
            "{engine}"
        );
        assert_eq!(
            r.rec.bytes_read + r.rec.bytes_written,
            1000 * 4096,
            "{engine}"
        );
        let per_second: u64 = r.rec.series.iter().map(|s| s.ops).sum();
        assert_eq!(per_second, 1000, "{engine}");
    }
}

#[test]
fn flushes_every_n_writes() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(&dir, 1 << 20);
    let r = run_one(&t, "op=write ops=40 sync=fdatasync:4");
    assert_eq!(r.rec.flushes.len(), 10);
    let r = run_one(&t, "op=write ops=30 sync=fsync:1 engine=lseek");
    assert_eq!(r.rec.flushes.len(), 30);
    let r = run_one(&t, "op=write ops=20 sync=fsync:5 engine=mmap");
    assert_eq!(r.rec.flushes.len(), 4);
    let r = run_one(&t, "op=write ops=20 sync=dsync");
    assert_eq!(r.rec.flushes.len(), 0);
}

#[test]
fn direct_io_and_sequential_backward() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(&dir, 4 << 20);
    if t.fs == "tmpfs" {
        eprintln!("skipped: temporary directory is a tmpfs");
        return;
    }
    let r = run_one(
        &t,
        "direct=1 bs=4k ops=200 pattern=seq direction=backward stride=8k",
    );
    assert_eq!(r.rec.ops(), 200);
    let r = run_one(&t, "direct=1 bs=64k op=write ops=50 dist=zipf:1.1");
    assert_eq!(r.rec.writes.len(), 50);
}

#[test]
fn io_uring_keeps_the_queue_full_and_flushes() {
    if !uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = target(&dir, 4 << 20);
    let r = run_one(&t, "engine=uring qd=8 op=mix:70 ops=2000 threads=2");
    assert_eq!(r.rec.ops(), 2000);
    let r = run_one(&t, "engine=uring qd=4 op=write ops=64 sync=fdatasync:8");
    assert_eq!(r.rec.writes.len(), 64);
    assert_eq!(r.rec.flushes.len(), 8);
    if t.fs != "tmpfs" {
        let r = run_one(
            &t,
            "engine=uring qd=16 direct=1 ops=500 dist=normal:0.5,0.1",
        );
        assert_eq!(r.rec.ops(), 500);
    }
}

#[test]
fn several_workloads_run_together_for_their_duration() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(&dir, 4 << 20);
    let ws = [
        parse_line("name=a duration=300ms", 0).unwrap(),
        parse_line("name=b op=write duration=1500ms threads=2", 1).unwrap(),
    ];
    let r = run(&t, &ws, RunOptions::default()).unwrap();
    assert_eq!(r.len(), 2);
    assert!(
        // Generous upper bound: one slow operation on a busy machine can overrun.
        r[0].elapsed.as_millis() >= 300 && r[0].elapsed.as_millis() < 1200,
        "{:?}",
        r[0].elapsed
    );
    assert!(r[1].elapsed.as_millis() >= 1500, "{:?}", r[1].elapsed);
    assert!(r[0].rec.ops() > 0 && r[1].rec.ops() > 0);
}

#[test]
fn append_grows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(&dir, 1 << 20);
    run_one(&t, "op=write flags=append ops=16");
    assert_eq!(
        std::fs::metadata(&t.path).unwrap().len(),
        (1 << 20) + 16 * 4096
    );
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ponder-iobench"))
}

#[test]
fn cli_reads_workloads_from_stdin_and_writes_json_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let png = dir.path().join("p.png");
    let mut child = bin()
        .arg("--size")
        .arg("2m")
        .arg("--json")
        .arg("--plot")
        .arg(&png)
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"# comment\nname=r ops=100\n\nname=w op=write ops=50 engine=lseek\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ws = v["workloads"].as_array().unwrap();
    assert_eq!(ws.len(), 2);
    assert_eq!(ws[0]["name"], "r");
    assert_eq!(ws[0]["total"]["ops"], 100);
    assert_eq!(ws[1]["total"]["ops"], 50);
    assert!(ws[0]["total"]["latency"]["p99_us"].as_f64().unwrap() > 0.0);
    assert!(!ws[0]["series"].as_array().unwrap().is_empty());
    let head = std::fs::read(&png).unwrap();
    assert_eq!(&head[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn cli_refuses_destructive_writes_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, vec![1u8; 8192]).unwrap();
    let out = bin().arg(&file).arg("op=write ops=1").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--destructive"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), vec![1u8; 8192]);

    let out = bin()
        .arg("--destructive")
        .arg(&file)
        .arg("op=write ops=1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = bin()
        .arg(dir.path().join("missing"))
        .arg("ops=1")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    let out = bin().arg(&file).arg("bs=4q").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("suffix"));

    let out = bin()
        .arg("--size")
        .arg("1024t")
        .arg(dir.path().join("huge"))
        .arg("ops=1")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("too large"));
}

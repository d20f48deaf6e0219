//! The on-disk format version: a data directory written by a newer format is refused at
//! start-up with a message naming both versions, and is left untouched.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use storage::{Engine, Fjall, WriteBatch};

use crate::{Cluster, ClusterError, FORMAT_VERSION};

/// Opens the fjall database under `dir` directly (as a newer Ponder would have left
/// it) and sets the catalog's `format` record to `version`.
fn write_format(dir: &Path, version: &str) {
    let e = Fjall::open(dir, 8 << 20).unwrap();
    e.create_space("catalog").unwrap();
    let mut b = WriteBatch::new();
    b.put("catalog", b"format".to_vec(), version.as_bytes().to_vec());
    e.apply(b).unwrap();
    e.persist().unwrap();
}

/// The database records (`db/<id>`) as JSON text.
fn db_records(engine: &Arc<dyn Engine>) -> Vec<String> {
    let snap = engine.snapshot();
    snap.range("catalog", Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .map(|kv| kv.unwrap())
        .filter(|(k, _)| k.starts_with(b"db/"))
        .map(|(_, v)| String::from_utf8_lossy(&v).to_string())
        .collect()
}

fn open(dir: &Path) -> (Arc<dyn Engine>, Result<Arc<Cluster>, ClusterError>) {
    let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dir, 8 << 20).unwrap());
    let c = Cluster::open(engine.clone(), "s");
    (engine, c)
}

#[test]
fn a_newer_format_is_refused_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let newer = (FORMAT_VERSION + 1).to_string();
    write_format(dir.path(), &newer);
    let (engine, res) = open(dir.path());
    let Err(err) = res else {
        panic!("a format-{newer} directory was opened");
    };
    assert!(
        matches!(&err, ClusterError::Format { found, supported }
            if *found == newer && *supported == FORMAT_VERSION),
        "{err:?}"
    );
    let msg = err.to_string();
    assert_eq!(
        msg,
        format!(
            "data directory has format version {newer}, this build supports \
             {FORMAT_VERSION}; refusing to start"
        )
    );
    // Nothing was written: the record is as the newer version left it, and no
    // database `test` was created.
    assert_eq!(
        engine.get("catalog", b"format").unwrap(),
        Some(newer.clone().into_bytes())
    );
    assert!(db_records(&engine).is_empty());
    drop(engine);
    // Refused again on the next start (the refusal left no lock or thread behind).
    let (_, again) = open(dir.path());
    assert!(matches!(again, Err(ClusterError::Format { .. })));
}

#[test]
fn an_unreadable_format_record_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    write_format(dir.path(), "x9");
    let (_, res) = open(dir.path());
    let msg = res.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("format version x9") && msg.contains(&FORMAT_VERSION.to_string()));
}

#[test]
fn the_current_format_opens_and_is_written_on_first_start() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, c) = open(dir.path());
    let c = c.unwrap();
    assert_eq!(
        engine.get("catalog", b"format").unwrap(),
        Some(FORMAT_VERSION.to_string().into_bytes())
    );
    let dbs = db_records(&engine);
    assert_eq!(dbs.len(), 1);
    assert!(dbs[0].contains(r#""name":"test""#), "{dbs:?}");
    c.shutdown();
}

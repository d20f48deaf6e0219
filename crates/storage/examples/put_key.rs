//! Test helper (not part of the server): writes one key into one space of a fjall
//! database directory and fsyncs it, as another build of Ponder might have left it.
//! The end-to-end tests use it to make a data directory with a newer format version:
//!
//! `put_key <data-dir>/data catalog format 2`

use std::process::ExitCode;

use storage::{Engine, Fjall, WriteBatch};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, space, key, value] = args.as_slice() else {
        eprintln!("usage: put_key <fjall directory> <space> <key> <value>");
        return ExitCode::from(2);
    };
    let run = || -> Result<(), storage::StorageError> {
        let e = Fjall::open(std::path::Path::new(dir), 8 << 20)?;
        e.create_space(space)?;
        let mut b = WriteBatch::new();
        b.put(space, key.as_bytes().to_vec(), value.as_bytes().to_vec());
        e.apply(b)?;
        e.persist()
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("put_key: {e}");
            ExitCode::FAILURE
        }
    }
}

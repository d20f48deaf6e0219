//! Embeds the HTTP admin's static files (`web/dist/` when a console build put an
//! `index.html` there, else `web/placeholder/`) as a sorted list of
//! `(path, include_bytes!)` pairs in `$OUT_DIR/assets.rs` (read by `src/http/assets.rs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let web = manifest.join("../../web");
    println!("cargo:rerun-if-changed={}", web.display());
    let dist = web.join("dist");
    let root = if dist.join("index.html").is_file() {
        dist
    } else {
        web.join("placeholder")
    };
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    let mut out = String::from(
        "/// The embedded files, sorted by path.\npub static EMBEDDED: &[(&str, &[u8])] = &[\n",
    );
    for (rel, abs) in &files {
        let _ = writeln!(
            out,
            "    ({rel:?}, include_bytes!({:?})),",
            abs.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("assets.rs");
    std::fs::write(dest, out).expect("writing the asset list");
}

/// Every regular file under `dir` whose path has no component starting with `.`.
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => collect(root, &path, out),
            Ok(t) if t.is_file() => {
                if let Ok(rel) = path.strip_prefix(root) {
                    let rel = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join("/");
                    out.push((rel, path.canonicalize().unwrap_or(path)));
                }
            }
            _ => {}
        }
    }
}

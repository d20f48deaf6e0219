//! The console's static files: the ones embedded at build time (`build.rs`: `web/dist/`
//! or the placeholder page) or, with `--web-static-directory DIR`, the files of `DIR`.
//!
//! `sanitize` is the only way from a request path to a file: it percent-decodes the
//! path and refuses anything that could leave the asset root (`..`, `.`, empty
//! segments, backslashes, NUL, encoded slashes, names starting with `.`). Files of a
//! static directory are also checked after resolving symbolic links: one that resolves
//! outside the directory is not served. RethinkDB answers a method other than GET
//! with 405 and an unknown file with 404 (`src/http/file_app.cc`); so does Ponder.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// Largest file served from a static directory.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The relative file a request path names (`/` is `index.html`), or None when the
/// path is not one the asset root may serve.
pub fn sanitize(raw_path: &str) -> Option<String> {
    let rest = raw_path.strip_prefix('/')?;
    if rest.is_empty() {
        return Some("index.html".into());
    }
    // Encoded separators would survive the split below as part of a name.
    let lower = rest.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") || lower.contains("%00") {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(rest)
        .decode_utf8()
        .ok()?;
    let mut parts = Vec::new();
    for seg in decoded.split('/') {
        let bad = seg.is_empty()
            || seg.starts_with('.')
            || seg.contains('\\')
            || seg.contains('\0')
            || seg.contains(':');
        if bad {
            return None;
        }
        parts.push(seg);
    }
    Some(parts.join("/"))
}

/// The content type of a file, by its extension.
pub fn content_type(rel: &str) -> &'static str {
    let ext = rel.rsplit_once('.').map_or("", |(_, e)| e);
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "gif" => "image/gif",
        "jpg" | "jpeg" => "image/jpeg",
        "ico" => "image/vnd.microsoft.icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// An embedded file.
pub fn embedded(rel: &str) -> Option<&'static [u8]> {
    EMBEDDED
        .binary_search_by(|(p, _)| (*p).cmp(rel))
        .ok()
        .and_then(|i| EMBEDDED.get(i))
        .map(|(_, b)| *b)
}

/// Where the console's files come from.
#[derive(Debug, Clone)]
pub enum Assets {
    /// Built into the binary.
    Embedded,
    /// A directory (`--web-static-directory`), canonical.
    Directory(PathBuf),
}

impl Assets {
    /// The assets for `static_dir` (embedded when None). Fails when the directory
    /// cannot be resolved.
    pub fn new(static_dir: Option<&Path>) -> Result<Assets, String> {
        match static_dir {
            None => Ok(Assets::Embedded),
            Some(d) => d
                .canonicalize()
                .map(Assets::Directory)
                .map_err(|e| format!("cannot use --web-static-directory {}: {e}", d.display())),
        }
    }

    /// The bytes of the sanitized relative path `rel`, if there is such a file.
    /// Reading a directory's file blocks: call it off the async workers.
    pub fn load(&self, rel: &str) -> Option<Cow<'static, [u8]>> {
        match self {
            Assets::Embedded => embedded(rel).map(Cow::Borrowed),
            Assets::Directory(root) => {
                let path = root.join(rel).canonicalize().ok()?;
                if !path.starts_with(root) {
                    return None;
                }
                let meta = std::fs::metadata(&path).ok()?;
                if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
                    return None;
                }
                std::fs::read(&path).ok().map(Cow::Owned)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_are_kept() {
        assert_eq!(sanitize("/").as_deref(), Some("index.html"));
        assert_eq!(sanitize("/index.html").as_deref(), Some("index.html"));
        assert_eq!(sanitize("/js/app%20x.js").as_deref(), Some("js/app x.js"));
    }

    #[test]
    fn paths_leaving_the_root_are_refused() {
        for p in [
            "/../etc/passwd",
            "/js/../../x",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2Fetc",
            "/js%2f..%2f..%2fx",
            "/js%5c..%5cx",
            "//etc/passwd",
            "/js//x",
            "/./index.html",
            "/.git/config",
            "/js/",
            "/a\\..\\b",
            "/c:/windows",
            "/x%00.html",
            "/%ff",
            "index.html",
            "",
        ] {
            assert_eq!(sanitize(p), None, "{p}");
        }
    }

    #[test]
    fn the_placeholder_or_console_is_embedded() {
        let index = embedded("index.html").expect("index.html is embedded");
        assert!(!index.is_empty());
        assert_eq!(embedded("nope.html"), None);
        assert!(EMBEDDED.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
    }

    #[test]
    fn a_static_directory_serves_only_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        std::fs::write(dir.path().join("secret"), b"no").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("link")).unwrap();
        let assets = Assets::new(Some(&root)).unwrap();
        assert_eq!(assets.load("a.txt").as_deref(), Some(&b"hello"[..]));
        assert_eq!(assets.load("link"), None);
        assert_eq!(assets.load("missing"), None);
        assert_eq!(content_type("a.js"), "text/javascript; charset=utf-8");
    }
}

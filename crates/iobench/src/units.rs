//! Parsing of human-friendly sizes (`4k`, `1MiB`, `1G`) and durations
//! (`10s`, `500ms`, `2m`).
//!
//! Size suffixes are binary, as in fio and Rebench: `k` = 1024, `m` = 1024²,
//! `g` = 1024³, `t` = 1024⁴; `KiB`/`KB`/`K` spellings are all accepted.

use std::time::Duration;

/// Parses a byte size such as `4096`, `4k`, `4KiB`, `1m`, `1G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "{text:?} is not a size (expected e.g. 4096, 4k, 1MiB, 1G)"
        ));
    }
    let n: u64 = num.parse().map_err(|_| format!("{text:?} is not a size"))?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size suffix {other:?} in {text:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {text:?} overflows 64 bits"))
}

/// Parses a duration such as `10`, `10s`, `500ms`, `2m`, `1h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (expected e.g. 10s, 500ms, 2m)"))?;
    let secs = match suffix.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => return Err(format!("unknown duration suffix {other:?} in {text:?}")),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return Err(format!("duration {text:?} must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Formats a byte count with a binary suffix, for messages and reports.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, unit) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("99999999999999999999t").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("abc").is_err());
    }

    #[test]
    fn format() {
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(1 << 30), "1GiB");
        assert_eq!(format_size(1000), "1000B");
    }
}

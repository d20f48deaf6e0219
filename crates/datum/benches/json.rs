//! Decode and encode of a 1 KB YCSB document (10 fields of 100 bytes from YCSB's
//! alphabet, which includes `"`, plus a `user…` id), the unit of every read; and the
//! read path of a stored document returned unchanged (`from_json_owned` then
//! `to_json_bytes`) for that document and a ~150-byte one.
//!
//! `cargo bench -p datum --bench json`

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// A document shaped like the benchmark's usertable rows, from a fixed seed.
fn ycsb_doc() -> Vec<u8> {
    let mut state = 0x5EEDu64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut fields = Vec::new();
    for f in 0..10 {
        let s: String = (0..100)
            .map(|_| char::from(((next() & 95) as u8) + b' '))
            .collect();
        fields.push((format!("field{f}"), serde_json::Value::String(s)));
    }
    fields.push((
        "id".to_string(),
        serde_json::Value::String("user6284781860667377211".into()),
    ));
    let obj: serde_json::Map<String, serde_json::Value> = fields.into_iter().collect();
    // Stored form: our own writer's compact output.
    let d = datum::from_json_value(&serde_json::Value::Object(obj)).unwrap_or(datum::Datum::Null);
    d.to_json_bytes()
}

fn bench(c: &mut Criterion) {
    let doc = ycsb_doc();
    let d = datum::from_json_slice(&doc).unwrap_or(datum::Datum::Null);
    let mut g = c.benchmark_group("ycsb_1k");
    g.throughput(Throughput::Bytes(doc.len() as u64));
    g.bench_function("decode_serde", |b| {
        b.iter(|| datum::from_json_slice_serde(black_box(&doc)))
    });
    g.bench_function("decode", |b| {
        b.iter(|| datum::from_json_slice(black_box(&doc)))
    });
    g.bench_function("encode", |b| b.iter(|| black_box(&d).to_json_bytes()));
    g.finish();
}

/// A ~150-byte stored document: `{"id":…,"pad":"x"*100,"r":…,"v":…}`.
fn small_doc() -> Vec<u8> {
    let d = datum::Datum::from_pairs([
        ("id", datum::Datum::Number(123.0)),
        ("pad", datum::Datum::str(&"x".repeat(100))),
        ("r", datum::Datum::Number(123.0)),
        ("v", datum::Datum::Number(23.0)),
    ]);
    d.to_json_bytes()
}

/// A stored document read and replied to unchanged (what scans and point reads do),
/// and read then looked at (one field), which is where a lazy map pays its build.
fn owned(c: &mut Criterion) {
    for (name, doc) in [("owned_150b", small_doc()), ("owned_1k", ycsb_doc())] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(doc.len() as u64));
        g.bench_function("decode_write", |b| {
            b.iter_batched(
                || doc.clone(),
                |bytes| match datum::from_json_owned(bytes) {
                    Ok(d) => d.to_json_bytes(),
                    Err(_) => Vec::new(),
                },
                BatchSize::SmallInput,
            )
        });
        g.bench_function("decode_get", |b| {
            b.iter_batched(
                || doc.clone(),
                |bytes| match datum::from_json_owned(bytes) {
                    Ok(d) => d.get("id").is_some(),
                    Err(_) => false,
                },
                BatchSize::SmallInput,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, bench, owned);
criterion_main!(benches);

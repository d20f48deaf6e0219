//! Decode and encode of a 1 KB YCSB document (10 fields of 100 bytes from YCSB's
//! alphabet, which includes `"`, plus a `user…` id), the unit of every read.
//!
//! `cargo bench -p datum --bench json`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

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

criterion_group!(benches, bench);
criterion_main!(benches);

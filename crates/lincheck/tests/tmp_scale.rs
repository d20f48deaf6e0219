mod sim;
use lincheck::{check_history, Budget, EventType, Func};
#[test]
fn scale() {
    for pct in [5u32] {
        for clients in [5usize] {
            let mut events = sim::simulate(sim::Shape {
                seed: 3,
                clients,
                ops_per_client: 20000 / clients,
                keys: 5,
                indeterminate_pct: pct,
            });
            let mut b = Budget::default();
            b.max_time = std::time::Duration::from_secs(30);
            b.max_steps = u64::MAX;
            b.max_cache_bytes = 200 << 20;
            let t = std::time::Instant::now();
            let r = check_history(&events, &b).unwrap();
            eprintln!(
                "pct {pct} clients {clients}: exit {} in {:?}",
                r.exit_code(),
                t.elapsed()
            );
            let reads: Vec<usize> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| e.kind == EventType::Ok && e.f == Func::Read)
                .map(|(i, _)| i)
                .collect();
            let i = reads[reads.len() / 2];
            events[i].value = serde_json::json!("x");
            let t = std::time::Instant::now();
            let r = check_history(&events, &b).unwrap();
            eprintln!("   mutated: exit {} in {:?}", r.exit_code(), t.elapsed());
            for k in &r.keys {
                if let lincheck::Verdict::Unknown(w) = &k.verdict {
                    eprintln!("    {} {w}", k.key);
                }
            }
            let ops = lincheck::pair(&events).unwrap();
            let key = &events[i].key;
            let info: Vec<_> = ops
                .iter()
                .filter(|o| &o.key == key && o.completion == lincheck::Completion::Indeterminate)
                .collect();
            let inv = ops
                .iter()
                .find(|o| {
                    o.key == *key
                        && o.invoke_ns <= events[i].time_ns
                        && o.complete_ns == Some(events[i].time_ns)
                })
                .map(|o| o.invoke_ns)
                .unwrap_or(0);
            eprintln!(
                "    key {key}: {} info ops total, {} invoked before the mutated read",
                info.len(),
                info.iter().filter(|o| o.invoke_ns < inv).count()
            );
        }
    }
}

//! Geospatial index reads: `get_intersecting` and `get_nearest`.
//!
//! A geospatial index stores each document's geometries (`cluster::index`); these terms
//! read every entry of the index and test it with the geometry code of `terms::geo`.
//! RethinkDB narrows the scan with S2 cell coverings; Ponder scans the whole index (the
//! answers are the same, the cost is linear in the index size) — see
//! `docs/compatibility.md`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;

use crate::access::Table;
use crate::error::{logic, Result, WithFrame};
use crate::eval::{describe, expect_int, expect_num, Ev};
use crate::terms::geo::shape::{self, parse_geometry, require_geometry, Shape};
use crate::value::{Sequence, Val};

/// The table and geospatial index a geo read uses, with RethinkDB's errors.
fn geo_table(ev: &Ev, term: &str) -> Result<(Arc<dyn Table>, String)> {
    let t = match ev.arg(0)? {
        Val::Table(t) if t.slice().is_none() => t,
        Val::Table(t) => {
            return Err(logic(format!(
                "Expected type TABLE but found TABLE_SLICE:\ntable(\"{}\")",
                t.name()
            )))
        }
        other => {
            return Err(logic(format!(
                "Expected type TABLE but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            )))
        }
    };
    let name = match crate::terms::index::index_opt(ev)? {
        Some(n) => n,
        None => return Err(logic(format!("{term} requires an index argument."))),
    };
    if name == t.primary_key() {
        return Err(logic(format!("{term} cannot use the primary index.")));
    }
    let status = t.index_status()?;
    match status.iter().find(|s| s.name == name) {
        None => return Err(crate::access::index_not_found(&name, t.db(), t.name())),
        Some(s) if !s.spec.geo => {
            return Err(logic(format!(
                "Index `{name}` is not a geospatial index.  {term} can only be used with a geospatial index."
            )))
        }
        Some(_) => {}
    }
    Ok((t, name))
}

/// The geometry of an entry (stored as its JSON text).
fn entry_shape(v: &Datum) -> Option<Shape> {
    let text = v.as_str()?;
    let d = datum::from_json_slice(text.as_bytes()).ok()?;
    parse_geometry(&d).ok()
}

fn pk_key(t: &Arc<dyn Table>, doc: &Datum) -> String {
    doc.get(t.primary_key())
        .map(Datum::to_json_string)
        .unwrap_or_default()
}

/// GET_INTERSECTING: the documents with a geometry in the index that intersects the
/// argument (once per intersecting entry of a multi index, as RethinkDB).
pub fn get_intersecting(ev: &Ev) -> Result<Val> {
    let (t, name) = geo_table(ev, "get_intersecting")?;
    let g = ev.datum(1)?;
    require_geometry(&g).at(1)?;
    let query = parse_geometry(&g).at(1)?;
    let pairs = t.index_pairs(&name, Bound::Unbounded, Bound::Unbounded)?;
    let stream = pairs.filter_map(move |r| match r {
        Err(e) => Some(Err(e)),
        Ok((v, doc)) => entry_shape(&v)
            .is_some_and(|s| crate::terms::geo::shapes_intersect(&s, &query))
            .then_some(Ok(doc)),
    });
    Ok(Val::Seq(Sequence {
        stream: Box::new(stream),
        is_array: false,
        table: Some(t),
        infinite: false,
    }))
}

/// GET_NEAREST: the documents nearest to a point (at most `max_results`, within
/// `max_dist`), as `{dist, doc}` sorted by distance.
pub fn get_nearest(ev: &Ev) -> Result<Val> {
    let (t, name) = geo_table(ev, "get_nearest")?;
    let p = ev.datum(1)?;
    require_geometry(&p).at(1)?;
    let point = match parse_geometry(&p).at(1)? {
        Shape::Point(v) => v,
        _ => {
            return Err(logic(format!(
                "Expected geometry of type `Point` but found `{}`.",
                shape::type_of(&p)?
            )))
            .at(1)
        }
    };
    let e = crate::terms::geo::geo_system(ev)?;
    let unit = crate::terms::geo::unit_factor(ev)?;
    let max_results = match ev.opt_datum("max_results")? {
        None => 100,
        Some(d) => {
            let n = expect_int(&d).at_opt("max_results")?;
            if n <= 0 {
                return Err(logic("max_results must be greater than 0."));
            }
            n as usize
        }
    };
    let max_dist = match ev.opt_datum("max_dist")? {
        None => 100_000.0,
        Some(d) => {
            let n = expect_num(&d).at_opt("max_dist")?;
            if n <= 0.0 {
                return Err(logic("max_dist must be greater than 0."));
            }
            n * unit
        }
    };
    // The nearest geometry of each document.
    let mut best: BTreeMap<String, (f64, Datum)> = BTreeMap::new();
    for r in t.index_pairs(&name, Bound::Unbounded, Bound::Unbounded)? {
        let (v, doc) = r?;
        let Some(s) = entry_shape(&v) else { continue };
        let d = crate::terms::geo::distance_to(e, point, &s);
        if d > max_dist {
            continue;
        }
        let k = pk_key(&t, &doc);
        match best.get(&k) {
            Some((old, _)) if *old <= d => {}
            _ => {
                best.insert(k, (d, doc));
            }
        }
    }
    let mut hits: Vec<(f64, Datum)> = best.into_values().collect();
    hits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let dists: Vec<f64> = hits.iter().map(|h| h.0).collect();
    nearest_traversal(e, max_dist, max_results, &dists)?;
    hits.truncate(max_results);
    let out = hits
        .into_iter()
        .map(|(d, doc)| {
            Datum::from_pairs([("dist", Datum::Number(d * (1.0 / unit))), ("doc", doc)])
        })
        .collect();
    Ok(Val::Datum(Datum::array(out)))
}

// RethinkDB's nearest traversal (`nearest_traversal_state_t`): the search radius starts
// at 10 m (on earth) and grows batch by batch with the density of the results found.
const NEAREST_INITIAL_RADIUS_FRACTION: f64 = 10.0 / 6_378_137.0;
const NEAREST_MAX_GROWTH_FACTOR: f64 = 2.0;
const NEAREST_GOAL_BATCH_SIZE: f64 = 100.0;
const NEAREST_NUM_VERTICES: f64 = 8.0;

/// Replays RethinkDB's batched nearest traversal over the sorted distances of the
/// documents within `max_dist`, failing as it does when a batch's query polygon
/// (`build_polygon_with_inradius_at_least`) would need a radius of a quarter of the
/// ellipsoid's minor circumference or more. The answer itself does not depend on the
/// batches (every batch covers all documents up to its radius), only this error does.
fn nearest_traversal(
    e: crate::terms::geo::Ellipsoid,
    max_dist: f64,
    max_results: usize,
    dists: &[f64],
) -> Result<()> {
    let b = e.a * (1.0 - e.f);
    let limit = 0.5 * std::f64::consts::PI * e.a.min(b);
    let distortion = e.a.max(b) / e.a.min(b);
    let mut processed = 0.0_f64;
    let mut current = max_dist.min(NEAREST_INITIAL_RADIUS_FRACTION * e.a);
    let mut emitted = 0usize;
    loop {
        let ex_r =
            current * 1.01 / (std::f64::consts::PI / NEAREST_NUM_VERTICES).cos() * distortion;
        if ex_r >= limit {
            return Err(logic(format!(
                "The distance has become too large for continuing the indexed nearest traversal.  Consider specifying a smaller `max_dist` parameter.  (Radius must be smaller than a quarter of the circumference along the minor axis of the reference ellipsoid.  Got {}m, but must be smaller than {}m.)",
                shape::fmt_g20(ex_r),
                shape::fmt_g20(limit)
            )));
        }
        let found = dists.partition_point(|d| *d <= current);
        let new = found.saturating_sub(emitted) as f64;
        emitted = emitted.max(found);
        let area = std::f64::consts::PI * (current * current - processed * processed);
        let density = new / area;
        processed = current;
        current = if density != 0.0 {
            ((NEAREST_GOAL_BATCH_SIZE / std::f64::consts::PI / density) + processed * processed)
                .sqrt()
        } else {
            processed * NEAREST_MAX_GROWTH_FACTOR
        };
        // As in RethinkDB, the growth cap applies to the new radius itself.
        current = current.min((current * NEAREST_MAX_GROWTH_FACTOR).min(max_dist));
        if processed >= max_dist || emitted >= max_results || !current.is_finite() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod traversal_tests {
    use super::*;

    #[test]
    fn traversal_fails_only_when_it_reaches_a_too_large_radius() {
        let e = crate::terms::geo::WGS84;
        let dists = [0.0, 0.0557, 1_565_109.1];
        let err = nearest_traversal(e, 10_000_000.0, 100, &dists).unwrap_err();
        assert!(
            err.message.contains(
                "Got 10968937.995244588703m, but must be smaller than 9985163.1855612862855m."
            ),
            "{}",
            err.message
        );
        assert!(nearest_traversal(e, 1_565_110.0, 100, &dists).is_ok());
        // Enough results before the radius grows too large: no error.
        assert!(nearest_traversal(e, 10_000_000.0, 2, &dists).is_ok());
    }
}

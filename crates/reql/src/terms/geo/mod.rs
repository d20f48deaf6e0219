//! Geometry terms: `point`, `line`, `polygon`, `circle`, `geojson`, `to_geojson`,
//! `distance`, `intersects`, `includes`, `fill` and `polygon_sub`, with RethinkDB 2.4's
//! validation and error messages. Geo indexes (`get_intersecting`, `get_nearest`) live
//! with the index code.
//!
//! A geometry is the GEOMETRY pseudo-type: a GeoJSON object (`Point`, `LineString` or
//! `Polygon`, coordinates as `[longitude, latitude]`) plus `$reql_type$`. Geodesic
//! distances and circles use Karney's algorithms in the version RethinkDB bundles
//! ([`geodesic`]) on the WGS84 ellipsoid, the unit sphere or a user-given `{a, f}`
//! ellipsoid; shape predicates live in [`sphere`], parsing and validation in [`shape`].

pub mod geodesic;
pub mod shape;
pub mod sphere;

use datum::{Datum, Object, Str};

use crate::error::{logic, Result, WithFrame};
use crate::eval::{expect_int, expect_num, expect_str, Ev};
use crate::terms::seq::filter_items;
use crate::value::Val;

use shape::{
    geometry_string, make_line, make_point, make_polygon, parse_geometry, parse_point_arg,
    polygon_of, require_geometry, LonLat, Shape, REQL_TYPE,
};
use sphere::V3;

/// POINT: `r.point(longitude, latitude)`.
pub fn point(ev: &Ev) -> Result<Val> {
    let lon = ev.num(0)?;
    let lat = ev.num(1)?;
    let d = make_point(LonLat { lon, lat });
    parse_geometry(&d)?;
    Ok(Val::Datum(d))
}

fn points_from_args(ev: &Ev) -> Result<Vec<LonLat>> {
    let mut out = Vec::with_capacity(ev.nargs());
    for i in 0..ev.nargs() {
        let d = ev.datum(i)?;
        out.push(parse_point_arg(&d).at(i)?);
    }
    Ok(out)
}

/// LINE: `r.line(point, point, ...)`.
pub fn line(ev: &Ev) -> Result<Val> {
    let pts = points_from_args(ev)?;
    let d = make_line(&pts);
    parse_geometry(&d)?;
    Ok(Val::Datum(d))
}

/// POLYGON: `r.polygon(point, point, point, ...)`.
pub fn polygon(ev: &Ev) -> Result<Val> {
    let pts = points_from_args(ev)?;
    let d = make_polygon(&pts);
    parse_geometry(&d)?;
    Ok(Val::Datum(d))
}

/// GEOJSON: a GeoJSON object made a geometry (validated; `bbox` dropped).
pub fn geojson(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    let obj = crate::eval::expect_object(&d).at(0)?;
    shape::ensure_no_crs(&d)?;
    parse_geometry(&d)?;
    if obj.contains_key(REQL_TYPE) {
        return Err(logic("GeoJSON object already had a $reql_type$ field."));
    }
    let mut m: Object = obj.clone();
    m.insert(Str::from(REQL_TYPE), Datum::str("GEOMETRY"));
    m.remove("bbox");
    let out = Datum::object(m);
    shape::sanitize(&out)?;
    Ok(Val::Datum(out))
}

/// TO_GEOJSON: the geometry without its `$reql_type$`.
pub fn to_geojson(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    require_geometry(&d).at(0)?;
    let mut m: Object = d.as_object().cloned().unwrap_or_default();
    m.remove(REQL_TYPE);
    Ok(Val::Datum(Datum::object(m)))
}

/// FILL: a LineString closed into a Polygon.
pub fn fill(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    require_geometry(&d).at(0)?;
    let ty = shape::type_of(&d)?;
    if ty != "LineString" {
        return Err(logic(format!(
            "Expected geometry of type `LineString` but found `{ty}`."
        )));
    }
    let coords = shape::field(&d, "coordinates")?;
    let arr = crate::eval::expect_array(&coords)?;
    let mut pts = Vec::with_capacity(arr.len());
    for p in arr {
        pts.push(shape::position(p)?);
    }
    let out = make_polygon(&pts);
    parse_geometry(&out)?;
    Ok(Val::Datum(out))
}

/// A reference ellipsoid: equator radius and flattening.
#[derive(Clone, Copy, Debug)]
pub struct Ellipsoid {
    /// Equator radius in meters.
    pub a: f64,
    /// Flattening.
    pub f: f64,
}

/// WGS84.
pub const WGS84: Ellipsoid = Ellipsoid {
    a: 6_378_137.0,
    f: 1.0 / 298.257_223_563,
};

/// The unit sphere.
pub const UNIT_SPHERE: Ellipsoid = Ellipsoid { a: 1.0, f: 0.0 };

pub(crate) fn geo_system(ev: &Ev) -> Result<Ellipsoid> {
    let Some(d) = ev.opt_datum("geo_system")? else {
        return Ok(WGS84);
    };
    let r: Result<Ellipsoid> = (|| match &d {
        Datum::Object(_) => {
            let a = expect_num(&shape::field(&d, "a")?)?;
            let f = expect_num(&shape::field(&d, "f")?)?;
            if a <= 0.0 {
                return Err(logic("The equator radius `a` must be positive."));
            }
            if !(0.0..1.0).contains(&f) {
                return Err(logic("The flattening `f` must be in the range [0, 1)."));
            }
            Ok(Ellipsoid { a, f })
        }
        _ => match expect_str(&d)? {
            "WGS84" => Ok(WGS84),
            "unit_sphere" => Ok(UNIT_SPHERE),
            other => Err(logic(format!(
                "Unrecognized geo system \"{other}\" (valid options: \"WGS84\", \"unit_sphere\")."
            ))),
        },
    })();
    r.at_opt("geo_system")
}

/// Meters per unit.
pub(crate) fn unit_factor(ev: &Ev) -> Result<f64> {
    let Some(d) = ev.opt_datum("unit")? else {
        return Ok(1.0);
    };
    let s = expect_str(&d).at_opt("unit")?;
    match s {
        "m" => Ok(1.0),
        "km" => Ok(1000.0),
        "mi" => Ok(1609.344),
        "nm" => Ok(1852.0),
        "ft" => Ok(0.3048),
        other => Err(logic(format!("Unrecognized distance unit `{other}`."))),
    }
}

/// Geodesic distance in meters between two lon/lat points.
pub fn geodesic_distance(e: Ellipsoid, p: LonLat, q: LonLat) -> f64 {
    geodesic::Geodesic::new(e.a, e.f).distance(p.lat, p.lon, q.lat, q.lon)
}

/// The point at `dist` meters from `p` along azimuth `azimuth` (degrees).
pub fn geodesic_point(e: Ellipsoid, p: LonLat, azimuth: f64, dist: f64) -> LonLat {
    let (lat, lon) = geodesic::Geodesic::new(e.a, e.f).destination(p.lat, p.lon, azimuth, dist);
    LonLat { lon, lat }
}

fn lon_lat_of(v: V3) -> LonLat {
    let (lon, lat) = sphere::to_lon_lat(v);
    LonLat { lon, lat }
}

/// Distance in meters from a point to a shape (RethinkDB projects onto lines and
/// polygons on the sphere, then measures the geodesic to the projection).
pub fn distance_to(e: Ellipsoid, p: V3, g: &Shape) -> f64 {
    let target = match g {
        Shape::Point(q) => *q,
        Shape::Line(l) => sphere::project_line(l, p),
        Shape::Polygon(poly) => poly.project(p),
    };
    if !matches!(g, Shape::Point(_)) && target == p {
        return 0.0;
    }
    geodesic_distance(e, lon_lat_of(p), lon_lat_of(target))
}

/// DISTANCE: geodesic distance between a point and a geometry.
pub fn distance(ev: &Ev) -> Result<Val> {
    let a = ev.datum(0)?;
    let b = ev.datum(1)?;
    let e = geo_system(ev)?;
    let unit = unit_factor(ev)?;
    require_geometry(&a).at(0)?;
    require_geometry(&b).at(1)?;
    let (p, g) = if shape::type_of(&a)? == "Point" {
        (parse_geometry(&a)?, parse_geometry(&b)?)
    } else {
        (parse_geometry(&b)?, parse_geometry(&a)?)
    };
    let Shape::Point(p) = p else {
        return Err(logic(format!(
            "Expected geometry of type `Point` but found `{}`.",
            shape::type_of(&b)?
        )));
    };
    // RethinkDB converts with one factor: meters * (1 / meters-per-unit).
    Ok(Val::Datum(Datum::Number(
        distance_to(e, p, &g) * (1.0 / unit),
    )))
}

/// The vertices of a circle polygon (closed: the first vertex repeated at the end).
pub fn circle_points(
    e: Ellipsoid,
    center: LonLat,
    radius: f64,
    num_vertices: u32,
) -> Result<Vec<LonLat>> {
    if radius <= 0.0 {
        return Err(logic("Radius must be positive"));
    }
    let b = e.a * (1.0 - e.f);
    let max_radius = 0.5 * std::f64::consts::PI * e.a.min(b);
    if radius >= max_radius {
        return Err(logic(format!(
            "Radius must be smaller than a quarter of the circumference along the minor axis of the reference ellipsoid.  Got {}m, but must be smaller than {}m.",
            shape::fmt_g20(radius),
            shape::fmt_g20(max_radius)
        )));
    }
    let mut out = Vec::with_capacity(num_vertices as usize + 1);
    for i in 0..num_vertices {
        let azimuth = -180.0 + (360.0 / f64::from(num_vertices) * f64::from(i));
        out.push(geodesic_point(e, center, azimuth, radius));
    }
    if let Some(first) = out.first().copied() {
        out.push(first);
    }
    Ok(out)
}

/// CIRCLE: a polygon (or with `fill: false` a line) approximating a circle.
pub fn circle(ev: &Ev) -> Result<Val> {
    let center = ev.datum(0)?;
    let radius = ev.num(1)?;
    let fill = ev.opt_bool("fill", true)?;
    let num_vertices = match ev.opt_datum("num_vertices")? {
        None => 32,
        Some(d) => {
            let n = expect_int(&d).at_opt("num_vertices")?;
            if n < 0 || n > i64::from(u32::MAX) {
                return Err(logic(format!("Integer too large: {}", d.to_json_string())))
                    .at_opt("num_vertices");
            }
            if n == 0 {
                return Err(logic("num_vertices must be positive.")).at_opt("num_vertices");
            }
            // The polygon's points are an array: held to the array limit before any
            // allocation (a count set by the argument, not by data).
            let points = usize::try_from(n).unwrap_or(usize::MAX).saturating_add(1);
            crate::terms::control::check_array_size(ev, points).at_opt("num_vertices")?;
            n as u32
        }
    };
    let e = geo_system(ev)?;
    let unit = unit_factor(ev)?;
    let c = parse_point_arg(&center).at(0)?;
    let pts = circle_points(e, c, radius * unit, num_vertices)?;
    let d = if fill {
        make_polygon(&pts)
    } else {
        make_line(&pts)
    };
    parse_geometry(&d)?;
    Ok(Val::Datum(d))
}

/// True when two shapes intersect.
pub fn shapes_intersect(a: &Shape, b: &Shape) -> bool {
    use Shape::*;
    match (a, b) {
        (Point(p), Point(q)) => p == q,
        (Point(p), Line(l)) | (Line(l), Point(p)) => sphere::line_contains_point(l, *p),
        (Point(p), Polygon(g)) | (Polygon(g), Point(p)) => g.contains_closed(*p),
        (Line(x), Line(y)) => sphere::lines_intersect(x, y),
        (Line(l), Polygon(g)) | (Polygon(g), Line(l)) => sphere::line_intersects_polygon(l, g),
        (Polygon(x), Polygon(y)) => sphere::polygons_intersect(x, y),
    }
}

/// True when polygon `a` includes shape `b`.
pub fn shape_included(a: &sphere::Polygon, b: &Shape) -> bool {
    match b {
        Shape::Point(p) => a.contains_closed(*p),
        Shape::Line(l) => sphere::polygon_contains_line(a, l),
        Shape::Polygon(q) => sphere::polygon_contains_polygon(a, q),
    }
}

/// Runs a geometry predicate on a geometry, or filters a sequence of geometries by it.
fn geo_filter(ev: &Ev, pred: fn(&Datum, &Shape) -> Result<bool>) -> Result<Val> {
    let v = ev.arg(0)?;
    let other = ev.datum(1)?;
    require_geometry(&other).at(1)?;
    let other_shape = parse_geometry(&other)?;
    let is_seq = matches!(
        &v,
        Val::Seq(_) | Val::Table(_) | Val::Datum(Datum::Array(_))
    );
    if is_seq {
        let seq = ev.to_seq(v).at(0)?;
        return Ok(Val::Seq(filter_items(seq, move |d| {
            require_geometry(d)?;
            pred(d, &other_shape)
        })));
    }
    let d = ev.to_datum(v).at(0)?;
    require_geometry(&d).at(0)?;
    Ok(Val::Datum(Datum::Bool(pred(&d, &other_shape)?)))
}

/// INTERSECTS: does the geometry (or each geometry of a sequence) intersect the other?
pub fn intersects(ev: &Ev) -> Result<Val> {
    geo_filter(ev, |d, other| {
        Ok(shapes_intersect(&parse_geometry(d)?, other))
    })
}

/// INCLUDES: does the polygon (or each polygon of a sequence) include the other geometry?
pub fn includes(ev: &Ev) -> Result<Val> {
    geo_filter(ev, |d, other| Ok(shape_included(&polygon_of(d)?, other)))
}

/// POLYGON_SUB: the first polygon with the second cut out as a hole.
pub fn polygon_sub(ev: &Ev) -> Result<Val> {
    let check = |i: usize| -> Result<Datum> {
        let d = ev.datum(i)?;
        require_geometry(&d).at(i)?;
        let ty = shape::type_of(&d).at(i)?;
        if ty != "Polygon" {
            return Err(logic(format!("Expected a Polygon but found a {ty}.")));
        }
        let n = shape::field(&d, "coordinates")
            .ok()
            .and_then(|c| c.as_array().map(<[Datum]>::len))
            .unwrap_or(0);
        if n > 1 {
            return Err(logic(
                "Expected a Polygon with only an outer shell.  This one has holes.",
            ))
            .at(i);
        }
        Ok(d)
    };
    let lhs = check(0)?;
    let rhs = check(1)?;
    let outer = polygon_of(&lhs)?;
    let inner = parse_geometry(&rhs)?;
    if !shape_included(&outer, &inner) {
        return Err(logic(
            "The second argument to `polygon_sub` is not contained in the first one.",
        ));
    }
    let mut coords: Vec<Datum> = shape::field(&lhs, "coordinates")?
        .as_array()
        .map(<[Datum]>::to_vec)
        .unwrap_or_default();
    if let Some(shell) = shape::field(&rhs, "coordinates")?
        .as_array()
        .and_then(|a| a.first().cloned())
    {
        coords.push(shell);
    }
    let out = Datum::from_pairs([
        (REQL_TYPE, Datum::str(geometry_string())),
        ("type", Datum::str("Polygon")),
        ("coordinates", Datum::array(coords)),
    ]);
    parse_geometry(&out)?;
    Ok(Val::Datum(out))
}

#[cfg(test)]
mod tests;

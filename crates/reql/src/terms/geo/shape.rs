//! GEOMETRY datums: building them, and parsing them into validated [`Shape`]s with
//! RethinkDB's GeoJSON rules and error messages.

pub use datum::keys::fmt_g20;
use datum::Datum;

/// The key that marks a pseudo-type object.
pub const REQL_TYPE: &str = "$reql_type$";

use crate::error::{logic, nonexist, Result};
use crate::eval::{expect_array, expect_num, expect_str, type_error};
use crate::terms::object::no_attribute;

use super::sphere::{self, Polygon, V3};

/// A longitude/latitude pair in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LonLat {
    /// Longitude.
    pub lon: f64,
    /// Latitude.
    pub lat: f64,
}

/// A parsed, validated geometry.
#[derive(Clone, Debug)]
pub enum Shape {
    /// A point.
    Point(V3),
    /// A polyline (at least two vertices).
    Line(Vec<V3>),
    /// A polygon.
    Polygon(Polygon),
}

/// The `$reql_type$` of geometries.
pub fn geometry_string() -> &'static str {
    "GEOMETRY"
}

fn pair(p: LonLat) -> Datum {
    Datum::array(vec![Datum::Number(p.lon), Datum::Number(p.lat)])
}

fn geometry(ty: &str, coordinates: Datum) -> Datum {
    Datum::from_pairs([
        (REQL_TYPE, Datum::str(geometry_string())),
        ("type", Datum::str(ty)),
        ("coordinates", coordinates),
    ])
}

/// A Point geometry.
pub fn make_point(p: LonLat) -> Datum {
    geometry("Point", pair(p))
}

/// A LineString geometry.
pub fn make_line(pts: &[LonLat]) -> Datum {
    geometry(
        "LineString",
        Datum::array(pts.iter().copied().map(pair).collect()),
    )
}

/// A Polygon geometry with one ring, closed if its last point is not its first.
pub fn make_polygon(pts: &[LonLat]) -> Datum {
    let mut ring: Vec<Datum> = pts.iter().copied().map(pair).collect();
    if let (Some(first), Some(last)) = (pts.first(), pts.last()) {
        if first != last {
            ring.push(pair(*first));
        }
    }
    geometry("Polygon", Datum::array(vec![Datum::array(ring)]))
}

/// A field of an object datum, or RethinkDB's "No attribute" error.
pub fn field(d: &Datum, name: &str) -> Result<Datum> {
    match d {
        Datum::Object(o) => o.get(name).cloned().ok_or_else(|| no_attribute(name, d)),
        other => Err(type_error("OBJECT", other)),
    }
}

/// The `type` of a geometry object.
pub fn type_of(d: &Datum) -> Result<String> {
    let t = field(d, "type")?;
    expect_str(&t).map(str::to_string)
}

/// Requires a GEOMETRY pseudo-type datum.
pub fn require_geometry(d: &Datum) -> Result<()> {
    if d.reql_type() == Some(geometry_string()) {
        Ok(())
    } else {
        Err(logic(format!(
            "Expected type GEOMETRY but found {}.",
            d.type_name()
        )))
    }
}

/// Rejects a non-null `crs` field.
pub fn ensure_no_crs(d: &Datum) -> Result<()> {
    match d.get("crs") {
        None | Some(Datum::Null) => Ok(()),
        Some(_) => Err(logic(
            "Non-default coordinate reference systems are not supported in GeoJSON objects.  Make sure the `crs` field of the geometry is null or non-existent.",
        )),
    }
}

/// RethinkDB's checks on a GEOMETRY object's fields (for geometries that arrive from a
/// driver, and for `r.geojson`'s result).
pub fn sanitize(d: &Datum) -> Result<()> {
    let Some(o) = d.as_object() else {
        return Ok(());
    };
    for (k, v) in o.iter() {
        match &**k {
            "coordinates" => {
                expect_array(v)?;
            }
            "type" => {
                expect_str(v)?;
            }
            "crs" | REQL_TYPE => {}
            other => {
                return Err(logic(format!(
                    "Unrecognized field `{other}` found in geometry object."
                )))
            }
        }
    }
    if !o.contains_key("type") {
        return Err(nonexist("Field `type` not found in geometry object."));
    }
    if !o.contains_key("coordinates") {
        return Err(nonexist(
            "Field `coordinates` not found in geometry object.",
        ));
    }
    Ok(())
}

/// Parses a GeoJSON position into a lon/lat pair (no range check).
pub fn position(d: &Datum) -> Result<LonLat> {
    let arr = expect_array(d)?;
    match arr.len() {
        0 | 1 => Err(logic(
            "Too few coordinates.  Need at least longitude and latitude.",
        )),
        2 => {
            let (Some(lon), Some(lat)) = (arr.first(), arr.get(1)) else {
                return Err(logic("Too few coordinates."));
            };
            Ok(LonLat {
                lon: expect_num(lon)?,
                lat: expect_num(lat)?,
            })
        }
        3 => Err(logic(
            "A third altitude coordinate in GeoJSON positions was found, but is not supported.",
        )),
        n => Err(logic(format!(
            "Too many coordinates.  GeoJSON position should have no more than three coordinates, but got {n}."
        ))),
    }
}

/// A position as a unit vector, with RethinkDB's range checks.
fn position_v3(d: &Datum) -> Result<V3> {
    let mut p = position(d)?;
    if !(-180.0..=180.0).contains(&p.lon) {
        return Err(logic(format!(
            "Longitude must be between -180 and 180.  Got {}.",
            fmt_g20(p.lon)
        )));
    }
    if p.lon == 180.0 {
        p.lon = -180.0;
    }
    if !(-90.0..=90.0).contains(&p.lat) {
        return Err(logic(format!(
            "Latitude must be between -90 and 90.  Got {}.",
            fmt_g20(p.lat)
        )));
    }
    Ok(sphere::from_lon_lat(p.lon, p.lat))
}

/// A point argument: a Point geometry or a `[lon, lat]` array.
pub fn parse_point_arg(d: &Datum) -> Result<LonLat> {
    if d.reql_type() == Some(geometry_string()) {
        let ty = type_of(d)?;
        if ty != "Point" {
            return Err(logic(format!(
                "Expected geometry of type `Point` but found `{ty}`."
            )));
        }
        return position(&field(d, "coordinates")?);
    }
    let arr = expect_array(d)?;
    if arr.len() != 2 {
        return Err(logic(format!(
            "Expected point coordinate pair.  Got {} element array instead of a 2 element one.",
            arr.len()
        )));
    }
    let (Some(lon), Some(lat)) = (arr.first(), arr.get(1)) else {
        return Err(logic("Expected point coordinate pair."));
    };
    Ok(LonLat {
        lon: expect_num(lon)?,
        lat: expect_num(lat)?,
    })
}

fn parse_line(coords: &Datum) -> Result<Vec<V3>> {
    let arr = expect_array(coords)?;
    if arr.len() < 2 {
        return Err(logic(
            "GeoJSON LineString must have at least two positions.",
        ));
    }
    let pts = arr.iter().map(position_v3).collect::<Result<Vec<_>>>()?;
    let valid = pts.windows(2).all(|w| match (w.first(), w.get(1)) {
        (Some(a), Some(b)) => a != b && *a != [-b[0], -b[1], -b[2]],
        _ => true,
    });
    if !valid {
        return Err(logic(
            "Invalid LineString.  Are there antipodal or duplicate vertices?",
        ));
    }
    Ok(pts)
}

fn parse_loop(coords: &Datum) -> Result<Vec<V3>> {
    let arr = expect_array(coords)?;
    if arr.len() < 4 {
        return Err(logic(
            "GeoJSON LinearRing must have at least four positions.",
        ));
    }
    let mut pts = arr.iter().map(position_v3).collect::<Result<Vec<_>>>()?;
    if pts.first() != pts.last() {
        return Err(logic(
            "First and last vertex of GeoJSON LinearRing must be identical.",
        ));
    }
    pts.pop();
    if !sphere::loop_is_valid(&pts) {
        return Err(logic(
            "Invalid LinearRing.  Are there antipodal or duplicate vertices? Is it self-intersecting?",
        ));
    }
    sphere::normalize_loop(&mut pts);
    Ok(pts)
}

fn parse_polygon(coords: &Datum) -> Result<Polygon> {
    let arr = expect_array(coords)?;
    let loops = arr.iter().map(parse_loop).collect::<Result<Vec<_>>>()?;
    if !sphere::loops_disjoint_boundaries(&loops) {
        return Err(logic(
            "Some edges in GeoJSON polygon could not be used.  Are they intersecting?",
        ));
    }
    Ok(Polygon {
        loops: sphere::xor_loops(loops),
    })
}

/// Parses and validates a geometry object (GeoJSON Point, LineString or Polygon).
pub fn parse_geometry(d: &Datum) -> Result<Shape> {
    let ty = type_of(d)?;
    let coords = field(d, "coordinates")?;
    match ty.as_str() {
        "Point" => Ok(Shape::Point(position_v3(&coords)?)),
        "LineString" => Ok(Shape::Line(parse_line(&coords)?)),
        "Polygon" => Ok(Shape::Polygon(parse_polygon(&coords)?)),
        "MultiPoint" | "MultiLineString" | "MultiPolygon" | "GeometryCollection" | "Feature"
        | "FeatureCollection" => Err(logic(format!("GeoJSON type `{ty}` is not supported."))),
        _ => Err(logic(format!("Unrecognized GeoJSON type `{ty}`."))),
    }
}

/// Parses a geometry that must be a Polygon.
pub fn polygon_of(d: &Datum) -> Result<Polygon> {
    let ty = type_of(d)?;
    if ty != "Polygon" {
        return Err(logic(format!(
            "Expected geometry of type `Polygon` but found `{ty}`."
        )));
    }
    match parse_geometry(d)? {
        Shape::Polygon(p) => Ok(p),
        _ => Err(logic("Expected geometry of type `Polygon`.")),
    }
}

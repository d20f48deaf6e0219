//! Unit tests of the geometry terms' math: geodesics, predicates, circles, formatting.

use super::shape::{fmt_g20, make_polygon, parse_geometry, LonLat, Shape};
use super::sphere::{self, from_lon_lat, Polygon};
use super::*;

fn ll(lon: f64, lat: f64) -> LonLat {
    LonLat { lon, lat }
}

fn poly(pts: &[(f64, f64)]) -> Polygon {
    let v: Vec<LonLat> = pts.iter().map(|&(a, b)| ll(a, b)).collect();
    match parse_geometry(&make_polygon(&v)) {
        Ok(Shape::Polygon(p)) => p,
        other => panic!("not a polygon: {other:?}"),
    }
}

fn square(x0: f64, y0: f64, x1: f64, y1: f64) -> Polygon {
    poly(&[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
}

fn holed() -> Polygon {
    let mut p = square(1.0, 1.0, 2.0, 2.0);
    let h = square(1.1, 1.1, 1.9, 1.9);
    p.loops.extend(h.loops);
    p
}

fn pt(lon: f64, lat: f64) -> Shape {
    Shape::Point(from_lon_lat(lon, lat))
}

fn line(pts: &[(f64, f64)]) -> Shape {
    Shape::Line(pts.iter().map(|&(a, b)| from_lon_lat(a, b)).collect())
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn one_degree_of_longitude_at_the_equator() {
    let d = geodesic_distance(WGS84, ll(0.0, 0.0), ll(1.0, 0.0));
    assert!(close(d, 111_319.490_8, 1e-4), "{d}");
}

#[test]
fn city_pairs() {
    // London – Paris, New York – Los Angeles (WGS84 geodesics).
    let d = geodesic_distance(WGS84, ll(-0.1278, 51.5074), ll(2.3522, 48.8566));
    assert!(close(d, 343_923.0, 500.0), "{d}");
    let d = geodesic_distance(WGS84, ll(-74.006, 40.7128), ll(-118.2437, 34.0522));
    assert!(close(d, 3_944_422.0, 2_000.0), "{d}");
    // Pole to pole is half a meridian.
    let d = geodesic_distance(WGS84, ll(0.0, -90.0), ll(0.0, 90.0));
    assert!(close(d * 2.0, 40_007_862.917, 0.01), "{d}");
}

#[test]
fn unit_sphere_and_scaled_ellipsoid() {
    let d = geodesic_distance(UNIT_SPHERE, ll(0.0, 0.0), ll(90.0, 0.0));
    assert!(close(d, std::f64::consts::FRAC_PI_2, 1e-12));
    let small = Ellipsoid {
        a: WGS84.a / 10.0,
        f: WGS84.f,
    };
    let a = geodesic_distance(WGS84, ll(-122.0, 37.0), ll(-123.0, 37.0));
    let b = geodesic_distance(small, ll(-122.0, 37.0), ll(-123.0, 37.0));
    assert!(close(a / 10.0, b, 1e-6));
}

#[test]
fn distance_to_lines_and_polygons() {
    let p = from_lon_lat(0.0, 0.0);
    let l = line(&[(0.1, 0.0), (1.0, 0.0)]);
    let to_line = distance_to(WGS84, p, &l);
    let to_pt = distance_to(WGS84, p, &pt(0.1, 0.0));
    assert_eq!(to_line, to_pt);
    assert_eq!(distance_to(WGS84, p, &line(&[(0.0, 0.0), (0.0, 1.0)])), 0.0);
    let tri = Shape::Polygon(poly(&[(0.0, -1.0), (0.0, 1.0), (10.0, 10.0)]));
    assert_eq!(distance_to(WGS84, from_lon_lat(0.5, 0.5), &tri), 0.0);
    let d = distance_to(WGS84, p, &line(&[(5.0, -1.0), (4.0, 2.0)]));
    assert!(close(d, 492_471.499, 0.01), "{d}");
}

#[test]
fn circle_vertices() {
    let pts = circle_points(WGS84, ll(0.0, 0.0), 1.0, 3).unwrap();
    assert_eq!(pts.len(), 4);
    assert_eq!(pts.first(), pts.last());
    assert!(close(pts[0].lat, -9.043_694_770_503_82e-6, 1e-18));
    assert!(close(pts[1].lon, -7.779_638_566_553_426e-6, 1e-18));
    for p in &pts {
        let d = geodesic_distance(WGS84, ll(0.0, 0.0), *p);
        assert!(close(d, 1.0, 1e-9), "{d}");
    }
    let err = circle_points(WGS84, ll(0.0, 0.0), 14_000_000.0, 3).unwrap_err();
    assert!(
        err.message
            .ends_with("Got 14000000m, but must be smaller than 9985163.1855612862855m."),
        "{}",
        err.message
    );
    let err = circle_points(UNIT_SPHERE, ll(0.0, 0.0), 2.0, 3).unwrap_err();
    assert!(
        err.message
            .ends_with("must be smaller than 1.570796326794896558m."),
        "{}",
        err.message
    );
}

#[test]
fn g20_formatting() {
    assert_eq!(fmt_g20(-91.0), "-91");
    assert_eq!(fmt_g20(181.5), "181.5");
    assert_eq!(fmt_g20(0.1), "0.10000000000000000555");
    assert_eq!(fmt_g20(1e-7), "9.9999999999999995475e-08");
}

#[test]
fn point_intersections() {
    let sq = Shape::Polygon(square(1.0, 1.0, 2.0, 2.0));
    let h = Shape::Polygon(holed());
    assert!(shapes_intersect(&sq, &pt(1.5, 1.5)));
    assert!(!shapes_intersect(&sq, &pt(2.5, 2.5)));
    assert!(!shapes_intersect(&h, &pt(1.5, 1.5)));
    assert!(shapes_intersect(&h, &pt(1.05, 1.05)));
    assert!(shapes_intersect(&sq, &pt(2.0, 2.0)));
    assert!(shapes_intersect(&sq, &pt(2.0, 1.5)));
    assert!(shapes_intersect(&h, &pt(1.1, 1.1)));
    assert!(shapes_intersect(&h, &pt(1.5, 1.1)));
    assert!(!shapes_intersect(&pt(1.0, 1.0), &pt(1.5, 1.5)));
    assert!(shapes_intersect(&pt(1.0, 1.0), &pt(1.0, 1.0)));
    assert!(shapes_intersect(
        &line(&[(1.0, 1.0), (1.0, 2.0)]),
        &pt(1.0, 1.8)
    ));
    assert!(shapes_intersect(
        &line(&[(1.0, 0.0), (2.0, 0.0)]),
        &pt(1.8, 0.0)
    ));
    assert!(!shapes_intersect(
        &line(&[(1.0, 1.0), (2.0, 1.0)]),
        &pt(1.5, 1.5)
    ));
}

#[test]
fn line_and_polygon_intersections() {
    let sq = Shape::Polygon(square(1.0, 1.0, 2.0, 2.0));
    let h = Shape::Polygon(holed());
    assert!(shapes_intersect(&sq, &line(&[(1.5, 1.5), (2.0, 2.0)])));
    assert!(shapes_intersect(&sq, &line(&[(1.5, 1.5), (2.0, 1.5)])));
    assert!(!shapes_intersect(&sq, &line(&[(2.0, 2.0), (3.0, 3.0)])));
    assert!(!shapes_intersect(&sq, &line(&[(2.0, 1.5), (3.0, 3.0)])));
    assert!(shapes_intersect(&sq, &line(&[(1.5, 1.5), (3.0, 3.0)])));
    assert!(shapes_intersect(
        &line(&[(1.0, 1.0), (2.0, 1.0)]),
        &line(&[(2.0, 1.0), (3.0, 1.0)])
    ));
    let inner = Shape::Polygon(square(1.2, 1.2, 1.8, 1.8));
    assert!(shapes_intersect(&sq, &inner));
    assert!(shapes_intersect(
        &sq,
        &Shape::Polygon(square(1.5, 1.5, 2.5, 2.5))
    ));
    assert!(!shapes_intersect(&h, &inner));
    assert!(!shapes_intersect(
        &h,
        &Shape::Polygon(square(1.1, 1.1, 1.9, 1.9))
    ));
    assert!(shapes_intersect(
        &sq,
        &Shape::Polygon(square(2.0, 1.1, 3.0, 1.9))
    ));
    assert!(!shapes_intersect(
        &sq,
        &Shape::Polygon(square(2.0, 2.0, 3.0, 3.0))
    ));
}

#[test]
fn inclusion() {
    let sq = square(1.0, 1.0, 2.0, 2.0);
    let h = holed();
    assert!(shape_included(&sq, &pt(1.5, 1.5)));
    assert!(!shape_included(&sq, &pt(2.5, 2.5)));
    assert!(!shape_included(&h, &pt(1.5, 1.5)));
    assert!(shape_included(&h, &pt(1.05, 1.05)));
    assert!(shape_included(&sq, &pt(2.0, 2.0)));
    assert!(shape_included(&h, &pt(1.1, 1.5)));
    assert!(shape_included(&sq, &line(&[(1.5, 1.5), (2.0, 2.0)])));
    assert!(!shape_included(&sq, &line(&[(2.0, 2.0), (3.0, 3.0)])));
    assert!(shape_included(&sq, &line(&[(2.0, 1.5), (2.0, 2.0)])));
    assert!(shape_included(&sq, &line(&[(2.0, 1.0), (2.0, 2.0)])));
    assert!(!shape_included(&sq, &line(&[(1.5, 1.5), (3.0, 3.0)])));
    assert!(shape_included(
        &sq,
        &Shape::Polygon(square(1.0, 1.0, 2.0, 2.0))
    ));
    assert!(shape_included(
        &sq,
        &Shape::Polygon(square(1.2, 1.2, 1.8, 1.8))
    ));
    assert!(shape_included(
        &sq,
        &Shape::Polygon(square(1.5, 1.5, 2.0, 2.0))
    ));
    assert!(!shape_included(
        &sq,
        &Shape::Polygon(square(1.5, 1.5, 2.5, 2.5))
    ));
    assert!(!shape_included(
        &h,
        &Shape::Polygon(square(1.2, 1.2, 1.8, 1.8))
    ));
    assert!(!shape_included(
        &h,
        &Shape::Polygon(square(1.1, 1.1, 2.0, 2.0))
    ));
    assert!(!shape_included(
        &sq,
        &Shape::Polygon(square(2.0, 1.1, 3.0, 1.9))
    ));
    assert!(!shape_included(
        &sq,
        &Shape::Polygon(square(2.0, 2.0, 3.0, 3.0))
    ));
}

#[test]
fn polygon_sub_containment() {
    let unit = square(0.0, 0.0, 1.0, 1.0);
    let c = |pts: &[(f64, f64)]| shape_included(&unit, &Shape::Polygon(poly(pts)));
    assert!(c(&[(0.1, 0.1), (0.9, 0.1), (0.9, 0.9), (0.1, 0.9)]));
    assert!(!c(&[(0.1, 0.9), (0.9, 0.0), (0.9, 0.9), (0.1, 0.9)]));
    assert!(!c(&[(0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0)]));
    assert!(!c(&[(0.0, -1.0), (1.0, -1.0), (1.0, 0.0), (0.0, 0.0)]));
    assert!(!c(&[(0.1, -1.0), (0.9, -1.0), (0.9, 0.5), (0.1, 0.5)]));
    assert!(c(&[(0.0, 0.0), (0.1, 0.9), (0.9, 0.9), (0.9, 0.1)]));
}

#[test]
fn loop_validation() {
    let bad = [ll(0.0, 0.0), ll(0.0, 1.0), ll(1.0, 0.0), ll(-1.0, 0.5)];
    assert!(parse_geometry(&make_polygon(&bad)).is_err());
    let dup = [ll(0.0, 0.0), ll(0.0, 0.0), ll(0.0, 0.0), ll(0.0, 0.0)];
    assert!(parse_geometry(&make_polygon(&dup)).is_err());
    // A clockwise ring is normalized to the small region it bounds.
    let cw = poly(&[(0.0, 0.0), (0.0, 1.0), (1.0, 1.0), (1.0, 0.0)]);
    assert_eq!(cw.side(from_lon_lat(0.5, 0.5)), sphere::Side::In);
    assert_eq!(cw.side(from_lon_lat(50.0, 50.0)), sphere::Side::Out);
}

#[test]
fn a_hole_with_the_shells_outline_leaves_no_polygon() {
    // r.polygon(sq).polygon_sub(r.polygon(sq)): S2's directed XOR cancels every edge.
    let sq = [ll(0.0, 0.0), ll(0.0, 10.0), ll(10.0, 10.0), ll(10.0, 0.0)];
    let shell = make_polygon(&sq);
    let coords = shape::field(&shell, "coordinates").unwrap_or(Datum::Null);
    let ring = coords
        .as_array()
        .and_then(|a| a.first().cloned())
        .unwrap_or(Datum::Null);
    let holed = Datum::from_pairs([
        (shape::REQL_TYPE, Datum::str(shape::geometry_string())),
        ("type", Datum::str("Polygon")),
        ("coordinates", Datum::array(vec![ring.clone(), ring])),
    ]);
    let empty = match parse_geometry(&holed) {
        Ok(Shape::Polygon(p)) => p,
        other => panic!("not a polygon: {other:?}"),
    };
    assert!(empty.loops.is_empty());
    let g = Shape::Polygon(empty.clone());
    let full = Shape::Polygon(poly(&[(0.0, 0.0), (0.0, 10.0), (10.0, 10.0), (10.0, 0.0)]));
    assert!(!shapes_intersect(&g, &pt(0.0, 0.0)));
    assert!(!shapes_intersect(&g, &pt(5.0, 5.0)));
    assert!(!shapes_intersect(&g, &full));
    assert!(!shapes_intersect(&full, &g));
    assert!(!shapes_intersect(&g, &line(&[(0.0, 0.0), (0.0, 10.0)])));
    // A hole strictly inside keeps its edges: the polygon is a ring.
    let ring = holed_ring();
    assert_eq!(ring.loops.len(), 2);
    assert!(shapes_intersect(&Shape::Polygon(ring), &pt(1.05, 1.05)));
}

fn holed_ring() -> Polygon {
    let mut p = square(1.0, 1.0, 2.0, 2.0);
    let h = square(1.1, 1.1, 1.9, 1.9);
    p.loops.extend(h.loops);
    Polygon {
        loops: sphere::xor_loops(p.loops),
    }
}

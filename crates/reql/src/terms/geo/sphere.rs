//! Spherical geometry on unit vectors: the predicates behind `intersects`, `includes`,
//! `polygon_sub` and the point-to-shape part of `distance`.
//!
//! Shapes follow RethinkDB's (S2's) model: edges are great-circle arcs, a loop is a
//! list of distinct vertices (implicitly closed) oriented counter-clockwise around the
//! smaller region it bounds, and a polygon is a set of loops whose interior is the set
//! of points inside an odd number of loops (a shell and its holes).
//!
//! Boundaries are closed, as RethinkDB documents: a point on the outline of a polygon
//! (or on the outline of one of its holes) intersects the polygon. Tests of "on the
//! boundary" use a tolerance of [`EPS`] radians (about 6 µm on the Earth). Where RethinkDB
//! follows S2's semi-open rule (a vertex of one polygon lying inside an edge of
//! another), a fixed rule on the edge direction decides.

/// A point on the unit sphere.
pub type V3 = [f64; 3];

/// Angular tolerance (radians) for "on the boundary".
pub const EPS: f64 = 1e-12;

/// Dot product.
pub fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// Cross product.
pub fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn add(a: V3, b: V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn scale(a: V3, k: f64) -> V3 {
    [a[0] * k, a[1] * k, a[2] * k]
}

fn norm2(a: V3) -> f64 {
    dot(a, a)
}

/// The vector scaled to unit length (the zero vector stays zero).
pub fn normalize(a: V3) -> V3 {
    let n = norm2(a).sqrt();
    if n == 0.0 {
        a
    } else {
        scale(a, 1.0 / n)
    }
}

fn neg(a: V3) -> V3 {
    [-a[0], -a[1], -a[2]]
}

/// The unit vector of a longitude/latitude pair in degrees.
pub fn from_lon_lat(lon: f64, lat: f64) -> V3 {
    let phi = lat * (std::f64::consts::PI / 180.0);
    let theta = lon * (std::f64::consts::PI / 180.0);
    let c = phi.cos();
    [theta.cos() * c, theta.sin() * c, phi.sin()]
}

/// `(longitude, latitude)` in degrees of a unit vector.
pub fn to_lon_lat(p: V3) -> (f64, f64) {
    let lat = p[2].atan2((p[0] * p[0] + p[1] * p[1]).sqrt());
    let lon = p[1].atan2(p[0]);
    (
        lon * (180.0 / std::f64::consts::PI),
        lat * (180.0 / std::f64::consts::PI),
    )
}

/// The angle between two unit vectors.
pub fn angle(a: V3, b: V3) -> f64 {
    norm2(cross(a, b)).sqrt().atan2(dot(a, b))
}

/// A normal of the great circle through `a` and `b`, stable for nearby points.
fn edge_normal(a: V3, b: V3) -> V3 {
    let n = cross(add(b, a), sub(b, a));
    if n == [0.0, 0.0, 0.0] {
        ortho(a)
    } else {
        n
    }
}

/// Some unit vector orthogonal to `a`.
fn ortho(a: V3) -> V3 {
    let k = if a[0].abs() <= a[1].abs() && a[0].abs() <= a[2].abs() {
        [1.0, 0.0, 0.0]
    } else if a[1].abs() <= a[2].abs() {
        [0.0, 1.0, 0.0]
    } else {
        [0.0, 0.0, 1.0]
    };
    normalize(cross(a, k))
}

fn ccw(a: V3, b: V3, c: V3) -> bool {
    dot(c, cross(a, b)) > 0.0
}

/// The angular distance from `x` to the arc `a`–`b`.
pub fn dist_to_edge(x: V3, a: V3, b: V3) -> f64 {
    let n = edge_normal(a, b);
    if ccw(n, a, x) && ccw(x, b, n) {
        let s = dot(x, n).abs() / norm2(n).sqrt();
        return s.min(1.0).asin();
    }
    let d2 = norm2(sub(x, a)).min(norm2(sub(x, b)));
    2.0 * (0.5 * d2.sqrt()).min(1.0).asin()
}

/// The point of the arc `a`–`b` closest to `x`.
pub fn closest_on_edge(x: V3, a: V3, b: V3) -> V3 {
    if x == a || x == b {
        return x;
    }
    let n = edge_normal(a, b);
    let p = sub(x, scale(n, dot(x, n) / norm2(n)));
    if ccw(n, a, p) && ccw(p, b, n) {
        return normalize(p);
    }
    if norm2(sub(x, a)) <= norm2(sub(x, b)) {
        a
    } else {
        b
    }
}

/// True when `x` lies on the arc `a`–`b` (within [`EPS`]).
pub fn on_edge(x: V3, a: V3, b: V3) -> bool {
    dist_to_edge(x, a, b) <= EPS
}

fn same(a: V3, b: V3) -> bool {
    a == b || angle(a, b) <= EPS
}

/// The points where arc `c`–`d` meets arc `a`–`b` (crossings, touchings, and the
/// endpoints of a shared stretch when the arcs run along the same great circle).
fn meetings(a: V3, b: V3, c: V3, d: V3) -> Vec<V3> {
    let mut out = Vec::new();
    for p in [c, d] {
        if on_edge(p, a, b) {
            out.push(p);
        }
    }
    for p in [a, b] {
        if on_edge(p, c, d) {
            out.push(p);
        }
    }
    let x = cross(edge_normal(a, b), edge_normal(c, d));
    if norm2(x) > 1e-30 {
        let x = normalize(x);
        for p in [x, neg(x)] {
            if on_edge(p, a, b) && on_edge(p, c, d) {
                out.push(p);
            }
        }
    }
    out
}

/// True when arcs `a`–`b` and `c`–`d` share at least one point.
pub fn edges_meet(a: V3, b: V3, c: V3, d: V3) -> bool {
    !meetings(a, b, c, d).is_empty()
}

/// True when arcs `a`–`b` and `c`–`d` cross at a point inside both (not at an endpoint).
pub fn edges_cross(a: V3, b: V3, c: V3, d: V3) -> bool {
    meetings(a, b, c, d)
        .into_iter()
        .any(|p| ![a, b, c, d].iter().any(|&v| same(p, v)))
}

/// The edges of a loop, closing it.
pub fn loop_edges(l: &[V3]) -> impl Iterator<Item = (V3, V3)> + '_ {
    l.iter()
        .zip(l.iter().cycle().skip(1))
        .map(|(a, b)| (*a, *b))
}

/// Sum of the turning angles of a loop: positive for a counter-clockwise loop around
/// the smaller region, negative when it winds around more than half the sphere.
fn turning_angle(l: &[V3]) -> f64 {
    let n = l.len();
    let mut sum = 0.0;
    for i in 0..n {
        let (Some(&a), Some(&b), Some(&c)) = (l.get(i), l.get((i + 1) % n), l.get((i + 2) % n))
        else {
            continue;
        };
        let n1 = cross(a, b);
        let n2 = cross(b, c);
        sum += dot(cross(n1, n2), b).atan2(dot(n1, n2));
    }
    sum
}

/// Orients a loop counter-clockwise around the smaller region it bounds.
pub fn normalize_loop(l: &mut [V3]) {
    if turning_angle(l) < 0.0 {
        l.reverse();
    }
}

/// Checks a loop: at least 3 vertices, no duplicates, no antipodal neighbours, and no
/// two non-adjacent edges that meet.
pub fn loop_is_valid(l: &[V3]) -> bool {
    let n = l.len();
    if n < 3 {
        return false;
    }
    for (i, a) in l.iter().enumerate() {
        if l.iter().skip(i + 1).any(|b| a == b) {
            return false;
        }
    }
    let edges: Vec<(V3, V3)> = loop_edges(l).collect();
    for (a, b) in &edges {
        if *a == neg(*b) {
            return false;
        }
    }
    for i in 0..n {
        for j in i + 1..n {
            let adjacent = j == i + 1 || (i == 0 && j == n - 1);
            let (Some(&(a, b)), Some(&(c, d))) = (edges.get(i), edges.get(j)) else {
                continue;
            };
            if adjacent {
                // Adjacent edges share one vertex; they must not run back over each other.
                let (shared, p, q) = if b == c { (b, a, d) } else { (a, b, c) };
                if on_edge(q, shared, p) || on_edge(p, shared, q) {
                    return false;
                }
            } else if edges_meet(a, b, c, d) {
                return false;
            }
        }
    }
    true
}

/// Where a point lies relative to a region.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    /// Strictly inside.
    In,
    /// On the boundary (within [`EPS`]).
    Boundary,
    /// Strictly outside.
    Out,
}

/// Strict containment of a point that is not on the loop's boundary (winding angle).
fn loop_winds(l: &[V3], p: V3) -> bool {
    let mut sum = 0.0;
    for (a, b) in loop_edges(l) {
        let ta = sub(a, scale(p, dot(a, p)));
        let tb = sub(b, scale(p, dot(b, p)));
        sum += dot(cross(ta, tb), p).atan2(dot(ta, tb));
    }
    sum > std::f64::consts::PI
}

/// Where `p` lies relative to one loop.
pub fn loop_side(l: &[V3], p: V3) -> Side {
    if loop_edges(l).any(|(a, b)| on_edge(p, a, b)) {
        Side::Boundary
    } else if loop_winds(l, p) {
        Side::In
    } else {
        Side::Out
    }
}

/// A polygon: loop 0 is the shell, the others holes; each oriented counter-clockwise
/// around the region it bounds.
#[derive(Clone, Debug, Default)]
pub struct Polygon {
    /// The loops.
    pub loops: Vec<Vec<V3>>,
}

impl Polygon {
    /// Where `p` lies relative to the polygon (boundaries of holes count as boundary).
    pub fn side(&self, p: V3) -> Side {
        let mut inside = false;
        for l in &self.loops {
            match loop_side(l, p) {
                Side::Boundary => return Side::Boundary,
                Side::In => inside = !inside,
                Side::Out => {}
            }
        }
        if inside {
            Side::In
        } else {
            Side::Out
        }
    }

    /// True when `p` is inside or on the boundary.
    pub fn contains_closed(&self, p: V3) -> bool {
        !self.loops.is_empty() && self.side(p) != Side::Out
    }

    fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        self.loops.iter().flat_map(|l| loop_edges(l))
    }

    /// The point of the polygon closest to `p` (`p` itself when inside).
    pub fn project(&self, p: V3) -> V3 {
        if self.contains_closed(p) {
            return p;
        }
        nearest_on_edges(p, self.edges()).unwrap_or(p)
    }

    fn has_holes(&self) -> bool {
        self.loops.len() > 1
    }
}

/// The closest point to `p` over a set of edges.
fn nearest_on_edges(p: V3, edges: impl Iterator<Item = (V3, V3)>) -> Option<V3> {
    let mut best: Option<(f64, V3, V3)> = None;
    for (a, b) in edges {
        let d = dist_to_edge(p, a, b);
        if best.is_none_or(|(bd, _, _)| d < bd) {
            best = Some((d, a, b));
        }
    }
    best.map(|(_, a, b)| closest_on_edge(p, a, b))
}

/// The point of a polyline closest to `p`.
pub fn project_line(line: &[V3], p: V3) -> V3 {
    nearest_on_edges(
        p,
        line.windows(2)
            .filter_map(|w| Some((*w.first()?, *w.get(1)?))),
    )
    .unwrap_or(p)
}

/// Splits arc `a`–`b` at every point where it meets one of `edges`, returning the
/// midpoints of the pieces.
fn piece_midpoints(a: V3, b: V3, edges: &[(V3, V3)]) -> Vec<V3> {
    let total = angle(a, b);
    let mut cuts: Vec<f64> = vec![0.0, total];
    for &(c, d) in edges {
        for p in meetings(a, b, c, d) {
            cuts.push(angle(a, p).min(total));
        }
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup_by(|x, y| (*x - *y).abs() <= EPS);
    let axis = normalize(edge_normal(a, b));
    cuts.windows(2)
        .filter_map(|w| {
            let t = (w.first()? + w.get(1)?) / 2.0;
            // Rotate `a` by `t` towards `b` around the arc's axis.
            let perp = cross(axis, a);
            Some(normalize(add(scale(a, t.cos()), scale(perp, t.sin()))))
        })
        .collect()
}

fn all_edges(loops: &[Vec<V3>]) -> Vec<(V3, V3)> {
    loops.iter().flat_map(|l| loop_edges(l)).collect()
}

/// True when a polyline shares a stretch (not just isolated points) with the polygon.
pub fn line_intersects_polygon(line: &[V3], poly: &Polygon) -> bool {
    if poly.loops.is_empty() {
        return false;
    }
    let edges = all_edges(&poly.loops);
    line.windows(2).any(|w| match (w.first(), w.get(1)) {
        (Some(&a), Some(&b)) => piece_midpoints(a, b, &edges)
            .into_iter()
            .any(|m| poly.contains_closed(m)),
        _ => false,
    })
}

/// True when every point of the polyline is inside or on the polygon.
pub fn polygon_contains_line(poly: &Polygon, line: &[V3]) -> bool {
    if poly.loops.is_empty() {
        return false;
    }
    let edges = all_edges(&poly.loops);
    line.iter().all(|&v| poly.contains_closed(v))
        && line.windows(2).all(|w| match (w.first(), w.get(1)) {
            (Some(&a), Some(&b)) => piece_midpoints(a, b, &edges)
                .into_iter()
                .all(|m| poly.contains_closed(m)),
            _ => true,
        })
}

/// True when two polylines share a point.
pub fn lines_intersect(x: &[V3], y: &[V3]) -> bool {
    x.windows(2).any(|u| {
        y.windows(2)
            .any(|v| match (u.first(), u.get(1), v.first(), v.get(1)) {
                (Some(&a), Some(&b), Some(&c), Some(&d)) => edges_meet(a, b, c, d),
                _ => false,
            })
    })
}

/// True when `p` lies on the polyline.
pub fn line_contains_point(line: &[V3], p: V3) -> bool {
    line.windows(2).any(|w| match (w.first(), w.get(1)) {
        (Some(&a), Some(&b)) => on_edge(p, a, b),
        _ => false,
    })
}

/// A point strictly inside a loop, next to the middle of its first edge.
fn interior_sample(l: &[V3]) -> Option<V3> {
    let (a, b) = loop_edges(l).next()?;
    let m = normalize(add(a, b));
    let n = normalize(cross(a, b));
    let len = angle(a, b);
    for k in [1e-7, 1e-9, 1e-5] {
        let s = normalize(add(m, scale(n, len * k)));
        if loop_side(l, s) == Side::In {
            return Some(s);
        }
    }
    None
}

/// S2's semi-open rule for a vertex lying inside an edge `a`–`b` of a loop: the loop owns
/// the points of edges heading north, and of edges heading west along a parallel.
fn edge_owns(a: V3, b: V3) -> bool {
    let (alon, alat) = to_lon_lat(a);
    let (blon, blat) = to_lon_lat(b);
    blat > alat || (blat == alat && blon < alon)
}

/// True when loop `b` lies inside loop `a` (boundaries may touch).
pub fn loop_contains_loop(a: &[V3], b: &[V3]) -> bool {
    for &v in b {
        if a.iter().any(|&w| same(v, w)) {
            continue;
        }
        match loop_side(a, v) {
            Side::In => {}
            Side::Out => return false,
            Side::Boundary => {
                let owned = loop_edges(a)
                    .filter(|&(p, q)| on_edge(v, p, q))
                    .all(|(p, q)| edge_owns(p, q));
                if !owned {
                    return false;
                }
            }
        }
    }
    let a_edges: Vec<(V3, V3)> = loop_edges(a).collect();
    for (p, q) in loop_edges(b) {
        if piece_midpoints(p, q, &a_edges)
            .into_iter()
            .any(|m| loop_side(a, m) == Side::Out)
        {
            return false;
        }
    }
    true
}

/// True when the regions of two loops overlap; with `boundary_counts`, also when their
/// boundaries share a stretch.
pub fn loops_intersect(a: &[V3], b: &[V3], boundary_counts: bool) -> bool {
    let hit = |s: Side| s == Side::In || (boundary_counts && s == Side::Boundary);
    if b.iter().any(|&v| loop_side(a, v) == Side::In)
        || a.iter().any(|&v| loop_side(b, v) == Side::In)
    {
        return true;
    }
    let a_edges: Vec<(V3, V3)> = loop_edges(a).collect();
    let b_edges: Vec<(V3, V3)> = loop_edges(b).collect();
    for &(p, q) in &b_edges {
        if piece_midpoints(p, q, &a_edges)
            .into_iter()
            .any(|m| hit(loop_side(a, m)))
        {
            return true;
        }
    }
    for &(p, q) in &a_edges {
        if piece_midpoints(p, q, &b_edges)
            .into_iter()
            .any(|m| hit(loop_side(b, m)))
        {
            return true;
        }
    }
    // Loops with the same outline: compare their interiors.
    if let Some(s) = interior_sample(b) {
        if loop_side(a, s) == Side::In {
            return true;
        }
    }
    false
}

fn intersects_shell(a: &Polygon, shell: &[V3]) -> bool {
    let mut inside = false;
    for l in &a.loops {
        if loop_contains_loop(l, shell) {
            inside = !inside;
        } else if !loop_contains_loop(shell, l) && loops_intersect(l, shell, true) {
            return true;
        }
    }
    inside
}

/// True when two polygons intersect (S2's structure over the loop predicates above).
pub fn polygons_intersect(a: &Polygon, b: &Polygon) -> bool {
    if a.loops.is_empty() || b.loops.is_empty() {
        return false;
    }
    if let ([x], [y]) = (a.loops.as_slice(), b.loops.as_slice()) {
        return loops_intersect(x, y, true);
    }
    b.loops.first().is_some_and(|s| intersects_shell(a, s))
        || a.loops.first().is_some_and(|s| intersects_shell(b, s))
}

/// True when polygon `b` lies inside polygon `a` (boundaries may touch).
pub fn polygon_contains_polygon(a: &Polygon, b: &Polygon) -> bool {
    // A polygon without edges is contained in any polygon (S2's `Contains`).
    let Some(b_shell) = b.loops.first() else {
        return true;
    };
    let Some(a_shell) = a.loops.first() else {
        return false;
    };
    if !loop_contains_loop(a_shell, b_shell) {
        return false;
    }
    if !a.has_holes() {
        return true;
    }
    // Every hole of A must stay out of B's region (or sit inside one of B's holes).
    a.loops.iter().skip(1).all(|h| {
        !loops_intersect(h, b_shell, false)
            || b.loops.iter().skip(1).any(|bh| loop_contains_loop(bh, h))
    })
}

/// The loops of a polygon as RethinkDB assembles them: with S2PolygonBuilder's
/// `DIRECTED_XOR` option, holes reversed, an edge cancelling an edge that runs the other
/// way between the same vertices. When every edge cancels (a hole with the shell's
/// outline, as `polygon_sub` of a polygon with itself makes), the polygon has no edges
/// and intersects and contains nothing. When only some do (a hole sharing edges with the
/// shell), S2 re-forms loops from the rest; the loops are kept here: the same region,
/// but the cancelled edges still count as boundary.
pub fn xor_loops(loops: Vec<Vec<V3>>) -> Vec<Vec<V3>> {
    type Key = [u64; 3];
    // S2 compares vertices with `==`, so -0.0 and 0.0 are one coordinate.
    let key = |v: V3| v.map(|x| if x == 0.0 { 0u64 } else { x.to_bits() });
    let mut edges: std::collections::HashMap<(Key, Key), usize> = Default::default();
    for (i, l) in loops.iter().enumerate() {
        for (a, b) in loop_edges(l) {
            let (a, b) = if i == 0 {
                (key(a), key(b))
            } else {
                (key(b), key(a))
            };
            match edges.get_mut(&(b, a)) {
                Some(n) if *n > 0 => *n -= 1,
                _ => *edges.entry((a, b)).or_default() += 1,
            }
        }
    }
    if edges.values().all(|&n| n == 0) {
        Vec::new()
    } else {
        loops
    }
}

/// True when the loops of a polygon do not cross each other.
pub fn loops_disjoint_boundaries(loops: &[Vec<V3>]) -> bool {
    for (i, x) in loops.iter().enumerate() {
        for y in loops.iter().skip(i + 1) {
            for (a, b) in loop_edges(x) {
                for (c, d) in loop_edges(y) {
                    if edges_cross(a, b, c, d) {
                        return false;
                    }
                }
            }
        }
    }
    true
}

//! Geodesics on an ellipsoid: the inverse problem (distance between two points) and the
//! direct problem (the point at a distance along an azimuth).
//!
//! This is a port of C. F. F. Karney's `geodesic.c` ("Algorithms for geodesics",
//! J. Geodesy 87, 43–55, 2013; MIT/X11 licence) in the 2013 version RethinkDB bundles
//! (`src/rdb_protocol/geo/karney/`), kept operation for operation so that distances
//! come out bit for bit as RethinkDB's. Later versions of the library (and the crates
//! ported from them) reduce angles differently and differ in the last digits. Only
//! what `distance`, `get_nearest` and `circle` need is ported: distances and
//! positions, no azimuths, reduced lengths or areas.

use std::f64::consts::PI;

/// The order of the series expansions.
const ORDER: usize = 6;
const NC1: usize = ORDER;
const NC1P: usize = ORDER;
const NC2: usize = ORDER;
const NA3: usize = ORDER;
const NC3: usize = ORDER;
const NC3X: usize = (NC3 * (NC3 - 1)) / 2;

const DEGREE: f64 = PI / 180.0;
const MAXIT1: u32 = 20;
/// `maxit1 + digits + 10` with 53-bit doubles.
const MAXIT2: u32 = MAXIT1 + f64::MANTISSA_DIGITS + 10;
const TOL0: f64 = f64::EPSILON;

fn tiny() -> f64 {
    f64::MIN_POSITIVE.sqrt()
}

fn tol1() -> f64 {
    200.0 * TOL0
}

fn tol2() -> f64 {
    TOL0.sqrt()
}

fn tolb() -> f64 {
    TOL0 * tol2()
}

fn xthresh() -> f64 {
    1000.0 * tol2()
}

fn sq(x: f64) -> f64 {
    x * x
}

/// `hypotx` of the C code (not libm's `hypot`).
fn hypotx(x: f64, y: f64) -> f64 {
    (x * x + y * y).sqrt()
}

fn cbrtx(x: f64) -> f64 {
    let y = x.abs().powf(1.0 / 3.0);
    if x < 0.0 {
        -y
    } else {
        y
    }
}

fn minx(x: f64, y: f64) -> f64 {
    if x < y {
        x
    } else {
        y
    }
}

fn maxx(x: f64, y: f64) -> f64 {
    if x > y {
        x
    } else {
        y
    }
}

/// Error-free sum: `u + v = s + t`.
fn sumx(u: f64, v: f64) -> (f64, f64) {
    let s = u + v;
    let mut up = s - v;
    let mut vpp = s - up;
    up -= u;
    vpp -= v;
    (s, -(up + vpp))
}

fn sin_cos_norm(sinx: &mut f64, cosx: &mut f64) {
    let r = hypotx(*sinx, *cosx);
    *sinx /= r;
    *cosx /= r;
}

fn ang_normalize(x: f64) -> f64 {
    if x >= 180.0 {
        x - 360.0
    } else if x < -180.0 {
        x + 360.0
    } else {
        x
    }
}

fn ang_normalize2(x: f64) -> f64 {
    ang_normalize(x % 360.0)
}

fn ang_diff(x: f64, y: f64) -> f64 {
    let (mut d, t) = sumx(-x, y);
    if (d - 180.0) + t > 0.0 {
        d -= 360.0;
    } else if (d + 180.0) + t <= 0.0 {
        d += 360.0;
    }
    d + t
}

fn ang_round(x: f64) -> f64 {
    let z = 1.0 / 16.0;
    let mut y = x.abs();
    // z - (z - y) rounds tiny angles to a multiple of 2^-57 (not simplified by Rust).
    y = if y < z { z - (z - y) } else { y };
    if x < 0.0 {
        -y
    } else {
        y
    }
}

/// `sum(c[i] * sin(2*i*x), i, 1, n)` (`sinp`) or `sum(c[i] * cos((2*i+1)*x), i, 0,
/// n-1)` by Clenshaw summation; `c[0]` is unused for the sine series.
fn sin_cos_series(sinp: bool, sinx: f64, cosx: f64, c: &[f64], n: usize) -> f64 {
    let mut k = n + usize::from(sinp);
    let at = |i: usize| c.get(i).copied().unwrap_or(0.0);
    let ar = 2.0 * (cosx - sinx) * (cosx + sinx);
    let mut y0 = if n & 1 == 1 {
        k -= 1;
        at(k)
    } else {
        0.0
    };
    let mut y1 = 0.0;
    for _ in 0..n / 2 {
        k -= 1;
        y1 = ar * y0 - y1 + at(k);
        k -= 1;
        y0 = ar * y1 - y0 + at(k);
    }
    if sinp {
        2.0 * sinx * cosx * y0
    } else {
        cosx * (y0 - y1)
    }
}

fn a1m1f(eps: f64) -> f64 {
    let eps2 = sq(eps);
    let t = eps2 * (eps2 * (eps2 + 4.0) + 64.0) / 256.0;
    (t + eps) / (1.0 - eps)
}

fn c1f(eps: f64) -> [f64; NC1 + 1] {
    let eps2 = sq(eps);
    let mut c = [0.0; NC1 + 1];
    let mut d = eps;
    c[1] = d * ((6.0 - eps2) * eps2 - 16.0) / 32.0;
    d *= eps;
    c[2] = d * ((64.0 - 9.0 * eps2) * eps2 - 128.0) / 2048.0;
    d *= eps;
    c[3] = d * (9.0 * eps2 - 16.0) / 768.0;
    d *= eps;
    c[4] = d * (3.0 * eps2 - 5.0) / 512.0;
    d *= eps;
    c[5] = -7.0 * d / 1280.0;
    d *= eps;
    c[6] = -7.0 * d / 2048.0;
    c
}

fn c1pf(eps: f64) -> [f64; NC1P + 1] {
    let eps2 = sq(eps);
    let mut c = [0.0; NC1P + 1];
    let mut d = eps;
    c[1] = d * (eps2 * (205.0 * eps2 - 432.0) + 768.0) / 1536.0;
    d *= eps;
    c[2] = d * (eps2 * (4005.0 * eps2 - 4736.0) + 3840.0) / 12288.0;
    d *= eps;
    c[3] = d * (116.0 - 225.0 * eps2) / 384.0;
    d *= eps;
    c[4] = d * (2695.0 - 7173.0 * eps2) / 7680.0;
    d *= eps;
    c[5] = 3467.0 * d / 7680.0;
    d *= eps;
    c[6] = 38081.0 * d / 61440.0;
    c
}

fn a2m1f(eps: f64) -> f64 {
    let eps2 = sq(eps);
    let t = eps2 * (eps2 * (25.0 * eps2 + 36.0) + 64.0) / 256.0;
    t * (1.0 - eps) - eps
}

fn c2f(eps: f64) -> [f64; NC2 + 1] {
    let eps2 = sq(eps);
    let mut c = [0.0; NC2 + 1];
    let mut d = eps;
    c[1] = d * (eps2 * (eps2 + 2.0) + 16.0) / 32.0;
    d *= eps;
    c[2] = d * (eps2 * (35.0 * eps2 + 64.0) + 384.0) / 2048.0;
    d *= eps;
    c[3] = d * (15.0 * eps2 + 80.0) / 768.0;
    d *= eps;
    c[4] = d * (7.0 * eps2 + 35.0) / 512.0;
    d *= eps;
    c[5] = 63.0 * d / 1280.0;
    d *= eps;
    c[6] = 77.0 * d / 2048.0;
    c
}

/// Solves `k^4+2*k^3-(x^2+y^2-1)*k^2-2*y^2*k-y^2 = 0` for the positive root `k`.
fn astroid(x: f64, y: f64) -> f64 {
    let p = sq(x);
    let q = sq(y);
    let r = (p + q - 1.0) / 6.0;
    if q == 0.0 && r <= 0.0 {
        return 0.0;
    }
    let s = p * q / 4.0;
    let r2 = sq(r);
    let r3 = r * r2;
    let disc = s * (s + 2.0 * r3);
    let mut u = r;
    if disc >= 0.0 {
        let mut t3 = s + r3;
        t3 += if t3 < 0.0 { -disc.sqrt() } else { disc.sqrt() };
        let t = cbrtx(t3);
        u += t + if t != 0.0 { r2 / t } else { 0.0 };
    } else {
        let ang = (-disc).sqrt().atan2(-(s + r3));
        u += 2.0 * r * (ang / 3.0).cos();
    }
    let v = (sq(u) + q).sqrt();
    let uv = if u < 0.0 { q / (v - u) } else { u + v };
    let w = (uv - q) / (2.0 * v);
    uv / ((uv + sq(w)).sqrt() + w)
}

/// One point of the auxiliary sphere with its reduced latitude: `(sbet, cbet, dn)`.
#[derive(Clone, Copy)]
struct Beta {
    s: f64,
    c: f64,
    dn: f64,
}

/// The state of one Newton step of the inverse problem (`Lambda12`'s outputs).
#[derive(Clone, Copy, Default)]
struct Lambda {
    lam12: f64,
    sig12: f64,
    ssig1: f64,
    csig1: f64,
    ssig2: f64,
    csig2: f64,
    eps: f64,
    dlam12: f64,
}

/// An ellipsoid with equatorial radius `a` and flattening `f`.
#[derive(Clone, Copy, Debug)]
pub struct Geodesic {
    a: f64,
    f: f64,
    f1: f64,
    ep2: f64,
    n: f64,
    b: f64,
    etol2: f64,
    a3x: [f64; NA3],
    c3x: [f64; NC3X],
}

impl Geodesic {
    /// `geod_init`.
    pub fn new(a: f64, f: f64) -> Geodesic {
        let f = if f <= 1.0 { f } else { 1.0 / f };
        let f1 = 1.0 - f;
        let e2 = f * (2.0 - f);
        let ep2 = e2 / sq(f1);
        let n = f / (2.0 - f);
        let b = a * f1;
        let etol2 = 0.1 * tol2() / (maxx(0.001, f.abs()) * minx(1.0, 1.0 - f / 2.0) / 2.0).sqrt();
        let a3x = [
            1.0,
            (n - 1.0) / 2.0,
            (n * (3.0 * n - 1.0) - 2.0) / 8.0,
            ((-n - 3.0) * n - 1.0) / 16.0,
            (-2.0 * n - 3.0) / 64.0,
            -3.0 / 128.0,
        ];
        let c3x = [
            (1.0 - n) / 4.0,
            (1.0 - n * n) / 8.0,
            ((3.0 - n) * n + 3.0) / 64.0,
            (2.0 * n + 5.0) / 128.0,
            3.0 / 128.0,
            ((n - 3.0) * n + 2.0) / 32.0,
            ((-3.0 * n - 2.0) * n + 3.0) / 64.0,
            (n + 3.0) / 128.0,
            5.0 / 256.0,
            (n * (5.0 * n - 9.0) + 5.0) / 192.0,
            (9.0 - 10.0 * n) / 384.0,
            7.0 / 512.0,
            (7.0 - 14.0 * n) / 512.0,
            7.0 / 512.0,
            21.0 / 2560.0,
        ];
        Geodesic {
            a,
            f,
            f1,
            ep2,
            n,
            b,
            etol2,
            a3x,
            c3x,
        }
    }

    fn a3f(&self, eps: f64) -> f64 {
        self.a3x.iter().rev().fold(0.0, |v, &x| eps * v + x)
    }

    /// The C3 coefficients; elements 1 to `NC3 - 1` are set.
    fn c3f(&self, eps: f64) -> [f64; NC3] {
        let mut c = [0.0; NC3];
        let mut j = NC3X;
        for k in (1..NC3).rev() {
            let mut t = 0.0;
            for _ in 0..NC3 - k {
                j -= 1;
                t = eps * t + self.c3x[j];
            }
            c[k] = t;
        }
        let mut mult = 1.0;
        for ck in c.iter_mut().skip(1) {
            mult *= eps;
            *ck *= mult;
        }
        c
    }

    /// `Lengths` without the geodesic scale: `(s12b, m12b, m0)`, the distance and the
    /// reduced length over `b`, and the secular coefficient of the reduced length.
    #[allow(clippy::too_many_arguments)]
    fn lengths(
        &self,
        eps: f64,
        sig12: f64,
        ssig1: f64,
        csig1: f64,
        dn1: f64,
        ssig2: f64,
        csig2: f64,
        dn2: f64,
    ) -> (f64, f64, f64) {
        let c1a = c1f(eps);
        let c2a = c2f(eps);
        let a1m1 = a1m1f(eps);
        let ab1 = (1.0 + a1m1)
            * (sin_cos_series(true, ssig2, csig2, &c1a, NC1)
                - sin_cos_series(true, ssig1, csig1, &c1a, NC1));
        let a2m1 = a2m1f(eps);
        let ab2 = (1.0 + a2m1)
            * (sin_cos_series(true, ssig2, csig2, &c2a, NC2)
                - sin_cos_series(true, ssig1, csig1, &c2a, NC2));
        let m0 = a1m1 - a2m1;
        let j12 = m0 * sig12 + (ab1 - ab2);
        let m12b = dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * j12;
        let s12b = (1.0 + a1m1) * sig12 + ab1;
        (s12b, m12b, m0)
    }

    /// `InverseStart`: a starting `(salp1, calp1)` for Newton's method, and for short
    /// lines the solution itself (`sig12 >= 0`) with `dnm`.
    fn inverse_start(&self, p1: Beta, p2: Beta, lam12: f64) -> (f64, f64, f64, f64) {
        let (sbet1, cbet1, dn1) = (p1.s, p1.c, p1.dn);
        let (sbet2, cbet2, dn2) = (p2.s, p2.c, p2.dn);
        let mut sig12 = -1.0;
        let mut dnm = 0.0;
        let sbet12 = sbet2 * cbet1 - cbet2 * sbet1;
        let cbet12 = cbet2 * cbet1 + sbet2 * sbet1;
        let sbet12a = sbet2 * cbet1 + cbet2 * sbet1;
        let shortline = cbet12 >= 0.0 && sbet12 < 0.5 && cbet2 * lam12 < 0.5;
        let mut omg12 = lam12;
        if shortline {
            let mut sbetm2 = sq(sbet1 + sbet2);
            sbetm2 /= sbetm2 + sq(cbet1 + cbet2);
            dnm = (1.0 + self.ep2 * sbetm2).sqrt();
            omg12 /= self.f1 * dnm;
        }
        let mut somg12 = omg12.sin();
        let mut comg12 = omg12.cos();
        let mut salp1 = cbet2 * somg12;
        let mut calp1 = if comg12 >= 0.0 {
            sbet12 + cbet2 * sbet1 * sq(somg12) / (1.0 + comg12)
        } else {
            sbet12a - cbet2 * sbet1 * sq(somg12) / (1.0 - comg12)
        };
        let ssig12 = hypotx(salp1, calp1);
        let csig12 = sbet1 * sbet2 + cbet1 * cbet2 * comg12;
        if shortline && ssig12 < self.etol2 {
            sig12 = ssig12.atan2(csig12);
        } else if self.n.abs() > 0.1
            || csig12 >= 0.0
            || ssig12 >= 6.0 * self.n.abs() * PI * sq(cbet1)
        {
            // The zeroth order spherical approximation is good enough.
        } else {
            let (x, y, lamscale);
            if self.f >= 0.0 {
                let k2 = sq(sbet1) * self.ep2;
                let eps = k2 / (2.0 * (1.0 + (1.0 + k2).sqrt()) + k2);
                lamscale = self.f * cbet1 * self.a3f(eps) * PI;
                let betscale = lamscale * cbet1;
                x = (lam12 - PI) / lamscale;
                y = sbet12a / betscale;
            } else {
                let cbet12a = cbet2 * cbet1 - sbet2 * sbet1;
                let bet12a = sbet12a.atan2(cbet12a);
                let (_, m12b, m0) =
                    self.lengths(self.n, PI + bet12a, sbet1, -cbet1, dn1, sbet2, cbet2, dn2);
                x = -1.0 + m12b / (cbet1 * cbet2 * m0 * PI);
                let betscale = if x < -0.01 {
                    sbet12a / x
                } else {
                    -self.f * sq(cbet1) * PI
                };
                lamscale = betscale / cbet1;
                y = (lam12 - PI) / lamscale;
            }
            if y > -tol1() && x > -1.0 - xthresh() {
                if self.f >= 0.0 {
                    salp1 = minx(1.0, -x);
                    calp1 = -(1.0 - sq(salp1)).sqrt();
                } else {
                    calp1 = maxx(if x > -tol1() { 0.0 } else { -1.0 }, x);
                    salp1 = (1.0 - sq(calp1)).sqrt();
                }
            } else {
                let k = astroid(x, y);
                let omg12a = lamscale
                    * if self.f >= 0.0 {
                        -x * k / (1.0 + k)
                    } else {
                        -y * (1.0 + k) / k
                    };
                somg12 = omg12a.sin();
                comg12 = -omg12a.cos();
                salp1 = cbet2 * somg12;
                calp1 = sbet12a - cbet2 * sbet1 * sq(somg12) / (1.0 - comg12);
            }
        }
        if salp1 > 0.0 {
            sin_cos_norm(&mut salp1, &mut calp1);
        } else {
            salp1 = 1.0;
            calp1 = 0.0;
        }
        (sig12, salp1, calp1, dnm)
    }

    /// `Lambda12`: the longitude difference reached from `(salp1, calp1)`, with its
    /// derivative when `diffp`.
    fn lambda12(&self, p1: Beta, p2: Beta, salp1: f64, calp1: f64, diffp: bool) -> Lambda {
        let (sbet1, cbet1, dn1) = (p1.s, p1.c, p1.dn);
        let (sbet2, cbet2, dn2) = (p2.s, p2.c, p2.dn);
        let calp1 = if sbet1 == 0.0 && calp1 == 0.0 {
            -tiny()
        } else {
            calp1
        };
        let salp0 = salp1 * cbet1;
        let calp0 = hypotx(calp1, salp1 * sbet1);
        let mut ssig1 = sbet1;
        let somg1 = salp0 * sbet1;
        let mut csig1 = calp1 * cbet1;
        let comg1 = csig1;
        sin_cos_norm(&mut ssig1, &mut csig1);
        let calp2 = if cbet2 != cbet1 || sbet2.abs() != -sbet1 {
            (sq(calp1 * cbet1)
                + if cbet1 < -sbet1 {
                    (cbet2 - cbet1) * (cbet1 + cbet2)
                } else {
                    (sbet1 - sbet2) * (sbet1 + sbet2)
                })
            .sqrt()
                / cbet2
        } else {
            calp1.abs()
        };
        let mut ssig2 = sbet2;
        let somg2 = salp0 * sbet2;
        let mut csig2 = calp2 * cbet2;
        let comg2 = csig2;
        sin_cos_norm(&mut ssig2, &mut csig2);
        let sig12 = maxx(csig1 * ssig2 - ssig1 * csig2, 0.0).atan2(csig1 * csig2 + ssig1 * ssig2);
        let omg12 = maxx(comg1 * somg2 - somg1 * comg2, 0.0).atan2(comg1 * comg2 + somg1 * somg2);
        let k2 = sq(calp0) * self.ep2;
        let eps = k2 / (2.0 * (1.0 + (1.0 + k2).sqrt()) + k2);
        let c3a = self.c3f(eps);
        let b312 = sin_cos_series(true, ssig2, csig2, &c3a, NC3 - 1)
            - sin_cos_series(true, ssig1, csig1, &c3a, NC3 - 1);
        let h0 = -self.f * self.a3f(eps);
        let domg12 = salp0 * h0 * (sig12 + b312);
        let lam12 = omg12 + domg12;
        let mut dlam12 = 0.0;
        if diffp {
            if calp2 == 0.0 {
                dlam12 = -2.0 * self.f1 * dn1 / sbet1;
            } else {
                let (_, m12b, _) = self.lengths(eps, sig12, ssig1, csig1, dn1, ssig2, csig2, dn2);
                dlam12 = m12b * (self.f1 / (calp2 * cbet2));
            }
        }
        Lambda {
            lam12,
            sig12,
            ssig1,
            csig1,
            ssig2,
            csig2,
            eps,
            dlam12,
        }
    }

    /// The reduced latitude of a (canonicalised) latitude in degrees.
    fn beta(&self, lat: f64, at_pole: bool) -> Beta {
        let phi = lat * DEGREE;
        let mut s = self.f1 * phi.sin();
        let mut c = if at_pole { tiny() } else { phi.cos() };
        sin_cos_norm(&mut s, &mut c);
        Beta { s, c, dn: 0.0 }
    }

    /// The distance in meters (units of `a`) between two points given in degrees
    /// (`geod_inverse` asked for `s12` only).
    pub fn distance(&self, lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
        let mut lon12 = ang_diff(ang_normalize(lon1), ang_normalize(lon2));
        lon12 = ang_round(lon12);
        let lonsign = if lon12 >= 0.0 { 1.0 } else { -1.0 };
        lon12 *= lonsign;
        let mut lat1 = ang_round(lat1);
        let mut lat2 = ang_round(lat2);
        if lat1.abs() < lat2.abs() {
            std::mem::swap(&mut lat1, &mut lat2);
        }
        let latsign = if lat1 < 0.0 { 1.0 } else { -1.0 };
        lat1 *= latsign;
        lat2 *= latsign;

        let mut p1 = self.beta(lat1, lat1 == -90.0);
        let mut p2 = self.beta(lat2, lat2.abs() == 90.0);
        if p1.c < -p1.s {
            if p2.c == p1.c {
                p2.s = if p2.s < 0.0 { p1.s } else { -p1.s };
            }
        } else if p2.s.abs() == -p1.s {
            p2.c = p1.c;
        }
        p1.dn = (1.0 + self.ep2 * sq(p1.s)).sqrt();
        p2.dn = (1.0 + self.ep2 * sq(p2.s)).sqrt();

        let lam12 = lon12 * DEGREE;
        let slam12 = if lon12 == 180.0 { 0.0 } else { lam12.sin() };
        let clam12 = lam12.cos();
        let mut meridian = lat1 == -90.0 || slam12 == 0.0;
        let mut s12x = 0.0;

        if meridian {
            // Heading for the target longitude (calp1 = cos(lam12)); north at the target.
            let (ssig1, csig1) = (p1.s, clam12 * p1.c);
            let (ssig2, csig2) = (p2.s, p2.c);
            let sig12 =
                maxx(csig1 * ssig2 - ssig1 * csig2, 0.0).atan2(csig1 * csig2 + ssig1 * ssig2);
            let (s12b, m12b, _) =
                self.lengths(self.n, sig12, ssig1, csig1, p1.dn, ssig2, csig2, p2.dn);
            if sig12 < 1.0 || m12b >= 0.0 {
                s12x = s12b * self.b;
            } else {
                meridian = false;
            }
        }

        if !meridian && p1.s == 0.0 && (self.f <= 0.0 || lam12 <= PI - self.f * PI) {
            // Along the equator.
            s12x = self.a * lam12;
        } else if !meridian {
            let (sig12, mut salp1, mut calp1, dnm) = self.inverse_start(p1, p2, lam12);
            if sig12 >= 0.0 {
                s12x = sig12 * self.b * dnm;
            } else {
                let mut last = Lambda::default();
                let mut numit = 0;
                let (mut salp1a, mut calp1a, mut salp1b, mut calp1b) = (tiny(), 1.0, tiny(), -1.0);
                let (mut tripn, mut tripb) = (false, false);
                while numit < MAXIT2 {
                    last = self.lambda12(p1, p2, salp1, calp1, numit < MAXIT1);
                    let v = last.lam12 - lam12;
                    let dv = last.dlam12;
                    // C's `!(fabs(v) >= limit)`: a NaN also ends the iteration.
                    let limit = if tripn { 8.0 } else { 2.0 } * TOL0;
                    if tripb
                        || v.abs()
                            .partial_cmp(&limit)
                            .is_none_or(|o| o == std::cmp::Ordering::Less)
                    {
                        break;
                    }
                    if v > 0.0 && (numit > MAXIT1 || calp1 / salp1 > calp1b / salp1b) {
                        salp1b = salp1;
                        calp1b = calp1;
                    } else if v < 0.0 && (numit > MAXIT1 || calp1 / salp1 < calp1a / salp1a) {
                        salp1a = salp1;
                        calp1a = calp1;
                    }
                    numit += 1;
                    if numit - 1 < MAXIT1 && dv > 0.0 {
                        let dalp1 = -v / dv;
                        let (sdalp1, cdalp1) = (dalp1.sin(), dalp1.cos());
                        let nsalp1 = salp1 * cdalp1 + calp1 * sdalp1;
                        if nsalp1 > 0.0 && dalp1.abs() < PI {
                            calp1 = calp1 * cdalp1 - salp1 * sdalp1;
                            salp1 = nsalp1;
                            sin_cos_norm(&mut salp1, &mut calp1);
                            tripn = v.abs() <= 16.0 * TOL0;
                            continue;
                        }
                    }
                    salp1 = (salp1a + salp1b) / 2.0;
                    calp1 = (calp1a + calp1b) / 2.0;
                    sin_cos_norm(&mut salp1, &mut calp1);
                    tripn = false;
                    tripb = (salp1a - salp1).abs() + (calp1a - calp1) < tolb()
                        || (salp1 - salp1b).abs() + (calp1 - calp1b) < tolb();
                }
                let (s12b, _, _) = self.lengths(
                    last.eps, last.sig12, last.ssig1, last.csig1, p1.dn, last.ssig2, last.csig2,
                    p2.dn,
                );
                s12x = s12b * self.b;
            }
        }
        // Converts -0 to 0.
        0.0 + s12x
    }

    /// The `(latitude, longitude)` in degrees reached from `(lat1, lon1)` going
    /// `s12` meters along azimuth `azi1` (degrees): `geod_direct`.
    pub fn destination(&self, lat1: f64, lon1: f64, azi1: f64, s12: f64) -> (f64, f64) {
        // geod_lineinit with the capabilities of a direct problem.
        let azi1 = ang_round(ang_normalize(azi1));
        let lon1 = ang_normalize(lon1);
        let alp1 = azi1 * DEGREE;
        let salp1 = if azi1 == -180.0 { 0.0 } else { alp1.sin() };
        let calp1 = if azi1.abs() == 90.0 { 0.0 } else { alp1.cos() };
        let b1 = self.beta(lat1, lat1.abs() == 90.0);
        let (sbet1, cbet1) = (b1.s, b1.c);
        let salp0 = salp1 * cbet1;
        let calp0 = hypotx(calp1, salp1 * sbet1);
        let mut ssig1 = sbet1;
        let somg1 = salp0 * sbet1;
        let mut csig1 = if sbet1 != 0.0 || calp1 != 0.0 {
            cbet1 * calp1
        } else {
            1.0
        };
        let comg1 = csig1;
        sin_cos_norm(&mut ssig1, &mut csig1);
        let k2 = sq(calp0) * self.ep2;
        let eps = k2 / (2.0 * (1.0 + (1.0 + k2).sqrt()) + k2);
        let a1m1 = a1m1f(eps);
        let c1a = c1f(eps);
        let b11 = sin_cos_series(true, ssig1, csig1, &c1a, NC1);
        let (s, c) = (b11.sin(), b11.cos());
        let stau1 = ssig1 * c + csig1 * s;
        let ctau1 = csig1 * c - ssig1 * s;
        let c1pa = c1pf(eps);
        let c3a = self.c3f(eps);
        let a3c = -self.f * salp0 * self.a3f(eps);
        let b31 = sin_cos_series(true, ssig1, csig1, &c3a, NC3 - 1);

        // geod_genposition for latitude and longitude.
        let tau12 = s12 / (self.b * (1.0 + a1m1));
        let (s, c) = (tau12.sin(), tau12.cos());
        let b12 = -sin_cos_series(
            true,
            stau1 * c + ctau1 * s,
            ctau1 * c - stau1 * s,
            &c1pa,
            NC1P,
        );
        let mut sig12 = tau12 - (b12 - b11);
        let mut ssig12 = sig12.sin();
        let mut csig12 = sig12.cos();
        if self.f.abs() > 0.01 {
            let ssig2p = ssig1 * csig12 + csig1 * ssig12;
            let csig2p = csig1 * csig12 - ssig1 * ssig12;
            let b12 = sin_cos_series(true, ssig2p, csig2p, &c1a, NC1);
            let serr = (1.0 + a1m1) * (sig12 + (b12 - b11)) - s12 / self.b;
            sig12 -= serr / (1.0 + k2 * sq(ssig2p)).sqrt();
            ssig12 = sig12.sin();
            csig12 = sig12.cos();
        }
        let ssig2 = ssig1 * csig12 + csig1 * ssig12;
        let mut csig2 = csig1 * csig12 - ssig1 * ssig12;
        let sbet2 = calp0 * ssig2;
        let mut cbet2 = hypotx(salp0, calp0 * csig2);
        if cbet2 == 0.0 {
            cbet2 = tiny();
            csig2 = tiny();
        }
        let somg2 = salp0 * ssig2;
        let comg2 = csig2;
        let omg12 = (somg2 * comg1 - comg2 * somg1).atan2(comg2 * comg1 + somg2 * somg1);
        let lam12 =
            omg12 + a3c * (sig12 + (sin_cos_series(true, ssig2, csig2, &c3a, NC3 - 1) - b31));
        let lon12 = ang_normalize2(lam12 / DEGREE);
        let lon2 = ang_normalize(lon1 + lon12);
        let lat2 = sbet2.atan2(self.f1 * cbet2) / DEGREE;
        (lat2, lon2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WGS84_F: f64 = 1.0 / 298.257_223_563;

    /// The distance between two points as RethinkDB measures it: each point goes
    /// through S2's unit vector and back to degrees first.
    fn between(g: &Geodesic, (lon1, lat1): (f64, f64), (lon2, lat2): (f64, f64)) -> f64 {
        use crate::terms::geo::sphere::{from_lon_lat, to_lon_lat};
        let (lon1, lat1) = to_lon_lat(from_lon_lat(lon1, lat1));
        let (lon2, lat2) = to_lon_lat(from_lon_lat(lon2, lat2));
        g.distance(lat1, lon1, lat2, lon2)
    }

    #[test]
    fn distances_are_rethinkdbs_to_the_last_digit() {
        let g = Geodesic::new(6_378_137.0, WGS84_F);
        // RethinkDB's answers (its test suite, geo/operations.yaml).
        assert_eq!(
            between(&g, (-122.0, 37.0), (-123.0, 37.0)),
            89011.26253835332
        );
        assert_eq!(
            between(&g, (-122.0, 37.0), (-122.0, 36.0)),
            110968.30443995494
        );
        assert_eq!(
            between(&g, (0.0, 0.0), (-180.0, 0.0)) * 2.0,
            40007862.917250897
        );
        assert_eq!(
            between(&g, (0.0, -90.0), (0.0, 90.0)) * 2.0,
            40007862.917250897
        );
        let unit = Geodesic::new(1.0, 0.0);
        assert_eq!(
            between(&unit, (-122.0, 37.0), (-123.0, 37.0)),
            0.01393875509649327
        );
    }

    #[test]
    fn destination_inverts_distance() {
        let g = Geodesic::new(6_378_137.0, WGS84_F);
        let (lat, lon) = g.destination(10.0, 20.0, 30.0, 1_000_000.0);
        assert!((g.distance(10.0, 20.0, lat, lon) - 1_000_000.0).abs() < 1e-6);
        let (lat, lon) = g.destination(0.0, 0.0, 90.0, 111_319.490_793_273_57);
        assert!(lat.abs() < 1e-12 && (lon - 1.0).abs() < 1e-9);
    }
}

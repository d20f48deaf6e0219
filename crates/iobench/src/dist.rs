//! Random numbers, distributions, and the offset generators built on them.
//!
//! The generator is xoshiro256** seeded through splitmix64: fast (a few
//! nanoseconds, so it never shows in a latency), reproducible from a seed, and
//! free of dependencies. Distributions:
//! - uniform block indexes (Lemire's unbiased multiply-shift);
//! - normal block indexes (Marsaglia's polar method, redrawn when they fall
//!   outside the region);
//! - Zipf ranks by Hörmann and Derflinger's rejection-inversion, which needs no
//!   table and so works for billions of blocks; ranks are then scattered over the
//!   region by a bijection so that the hot blocks are not all at its start.

use crate::workload::{Dist, Pattern};

/// xoshiro256** pseudo-random generator.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded from `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform float in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in [0, n), n > 0, without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = (self.next_u64() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }

    /// A standard normal variate (Marsaglia's polar method, one value per call).
    pub fn standard_normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.next_f64() - 1.0;
            let v = 2.0 * self.next_f64() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// Zipf distribution over ranks 1..=n with exponent `s` (rejection-inversion).
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    /// The distribution P(k) ∝ k^-exponent over 1..=n (n ≥ 1, exponent > 0).
    pub fn new(n: u64, exponent: f64) -> Self {
        let mut z = Zipf {
            n: n.max(1) as f64,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// Draws a rank in 1..=n; rank 1 is the most frequent.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.next_f64() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// ln(1+x)/x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x − 1)/x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// A bijection of [0, n) that scatters consecutive Zipf ranks over the region.
fn scatter(rank0: u64, n: u64) -> u64 {
    // 2^61 − 1 is prime and larger than any block count we can address, so it
    // is coprime with n and multiplication by it modulo n is a permutation.
    const P: u128 = (1u128 << 61) - 1;
    ((rank0 as u128 * P) % n as u128) as u64
}

/// A distribution of block indexes over [0, n).
#[derive(Debug, Clone)]
pub enum BlockDist {
    /// Every block equally likely.
    Uniform {
        /// Number of blocks.
        n: u64,
    },
    /// Normal, in blocks.
    Normal {
        /// Number of blocks.
        n: u64,
        /// Mean, in blocks.
        mean: f64,
        /// Standard deviation, in blocks.
        sd: f64,
    },
    /// Zipf ranks scattered over the blocks.
    Zipf {
        /// Number of blocks.
        n: u64,
        /// The rank sampler.
        zipf: Zipf,
    },
}

impl BlockDist {
    /// The distribution `dist` over `n` blocks (n ≥ 1).
    pub fn new(dist: Dist, n: u64) -> Self {
        let n = n.max(1);
        match dist {
            Dist::Uniform => BlockDist::Uniform { n },
            Dist::Normal { mean, sd } => BlockDist::Normal {
                n,
                mean: mean * n as f64,
                sd: sd * n as f64,
            },
            Dist::Zipf { s } => BlockDist::Zipf {
                n,
                zipf: Zipf::new(n, s),
            },
        }
    }

    /// Draws a block index in [0, n).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match self {
            BlockDist::Uniform { n } => rng.below(*n),
            BlockDist::Normal { n, mean, sd } => {
                for _ in 0..64 {
                    let x = (mean + sd * rng.standard_normal()).floor();
                    if x >= 0.0 && x < *n as f64 {
                        return x as u64;
                    }
                }
                // A mean at the edge with a tiny sd could keep missing: clamp.
                mean.floor().clamp(0.0, (*n - 1) as f64) as u64
            }
            BlockDist::Zipf { n, zipf } => scatter(zipf.sample(rng) - 1, *n),
        }
    }
}

/// Produces the byte offsets of one thread's operations.
#[derive(Debug, Clone)]
pub enum OffsetGen {
    /// Random offsets: `base + index * align`.
    Random {
        /// Start of the region.
        base: u64,
        /// Alignment (the unit of a block index).
        align: u64,
        /// Index distribution.
        dist: BlockDist,
    },
    /// Sequential offsets wrapping around within the region.
    Sequential {
        /// Start of the region.
        base: u64,
        /// Last valid offset (region end minus block size).
        last: u64,
        /// Distance between offsets.
        stride: u64,
        /// Walk towards the start.
        backward: bool,
        /// The next offset to return.
        next: u64,
        /// Whether `next` starts a new pass (the walk wrapped around).
        pending_wrap: bool,
        /// Whether the offset last returned started a new pass.
        wrapped: bool,
    },
}

impl OffsetGen {
    /// The generator for thread `thread` of `threads`, over the region
    /// `[base, base + span)`, for operations of `bs` bytes. `span >= bs`.
    pub fn new(
        pattern: Pattern,
        base: u64,
        span: u64,
        bs: u64,
        align: u64,
        thread: u32,
        threads: u32,
    ) -> Self {
        let last = base + span - bs;
        match pattern {
            Pattern::Random { dist } => {
                let n = (span - bs) / align + 1;
                OffsetGen::Random {
                    base,
                    align,
                    dist: BlockDist::new(dist, n),
                }
            }
            Pattern::Sequential { backward, stride } => {
                // Threads start spread over the region, each at a multiple of
                // the stride, so they do not read the same blocks in lockstep.
                let steps = (last - base) / stride + 1;
                let start_step = steps * thread as u64 / threads.max(1) as u64;
                let next = if backward {
                    base + (steps - 1 - start_step) * stride
                } else {
                    base + start_step * stride
                };
                OffsetGen::Sequential {
                    base,
                    last: base + (steps - 1) * stride,
                    stride,
                    backward,
                    next,
                    pending_wrap: false,
                    wrapped: false,
                }
            }
        }
    }

    /// Whether the offset last returned started a new pass over the region
    /// (always false for random offsets).
    pub fn wrapped(&self) -> bool {
        matches!(self, OffsetGen::Sequential { wrapped: true, .. })
    }

    /// The next offset.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self {
            OffsetGen::Random { base, align, dist } => *base + dist.sample(rng) * *align,
            OffsetGen::Sequential {
                base,
                last,
                stride,
                backward,
                next,
                pending_wrap,
                wrapped,
            } => {
                let off = *next;
                *wrapped = std::mem::take(pending_wrap);
                let (n, wrap) = if *backward {
                    if off < *base + *stride {
                        (*last, true)
                    } else {
                        (off - *stride, false)
                    }
                } else if off + *stride > *last {
                    (*base, true)
                } else {
                    (off + *stride, false)
                };
                *next = n;
                *pending_wrap = wrap;
                off
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{mean, std_dev};

    #[test]
    fn rng_is_reproducible_and_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        for _ in 0..10_000 {
            let f = a.next_f64();
            assert!((0.0..1.0).contains(&f));
            assert!(a.below(7) < 7);
        }
    }

    /// Chi-squared test of uniform flatness over 100 buckets.
    #[test]
    fn uniform_is_flat() {
        let n = 100u64;
        let draws = 1_000_000u64;
        let d = BlockDist::new(Dist::Uniform, n);
        let mut rng = Rng::new(1);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[d.sample(&mut rng) as usize] += 1;
        }
        let expected = draws as f64 / n as f64;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        // 99 degrees of freedom: the 99.9th percentile is about 148.
        assert!(chi2 < 148.0, "chi² = {chi2}");
        let max_dev = counts
            .iter()
            .map(|&c| (c as f64 - expected).abs() / expected)
            .fold(0.0, f64::max);
        assert!(max_dev < 0.05, "max relative deviation {max_dev}");
    }

    #[test]
    fn normal_has_requested_mean_and_sd() {
        let n = 1_000_000u64;
        let d = BlockDist::new(
            Dist::Normal {
                mean: 0.3,
                sd: 0.05,
            },
            n,
        );
        let mut rng = Rng::new(2);
        let xs: Vec<f64> = (0..200_000)
            .map(|_| d.sample(&mut rng) as f64 / n as f64)
            .collect();
        let m = mean(&xs);
        let sd = std_dev(&xs);
        assert!((m - 0.3).abs() < 0.001, "mean {m}");
        assert!((sd - 0.05).abs() < 0.001, "sd {sd}");
        // About 68.3% within one sd.
        let within =
            xs.iter().filter(|&&x| (x - 0.3).abs() < 0.05).count() as f64 / xs.len() as f64;
        assert!((within - 0.6827).abs() < 0.01, "within 1 sd: {within}");
    }

    #[test]
    fn normal_stays_in_range_when_truncated() {
        let d = BlockDist::new(Dist::Normal { mean: 0.0, sd: 0.5 }, 1000);
        let mut rng = Rng::new(3);
        for _ in 0..10_000 {
            assert!(d.sample(&mut rng) < 1000);
        }
    }

    /// The rank-frequency curve matches k^-s: frequencies of the top ranks
    /// against the exact probabilities, and the slope on a log-log plot.
    #[test]
    fn zipf_rank_frequency() {
        for &s in &[0.8, 1.0, 1.2, 2.0] {
            let n = 1000u64;
            let draws = 1_000_000u64;
            let z = Zipf::new(n, s);
            let mut rng = Rng::new(4);
            let mut counts = vec![0u64; n as usize + 1];
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                counts[k as usize] += 1;
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            for k in 1..=10u64 {
                let expected = (k as f64).powf(-s) / norm;
                let got = counts[k as usize] as f64 / draws as f64;
                let tolerance = 4.0 * (expected * (1.0 - expected) / draws as f64).sqrt() + 1e-4;
                assert!(
                    (got - expected).abs() < tolerance,
                    "s={s} rank {k}: got {got}, expected {expected}"
                );
            }
            // Least-squares slope of log(freq) over log(rank) for ranks 1..=100.
            let pts: Vec<(f64, f64)> = (1..=100u64)
                .filter(|&k| counts[k as usize] > 0)
                .map(|k| ((k as f64).ln(), (counts[k as usize] as f64).ln()))
                .collect();
            let mx = mean(&pts.iter().map(|p| p.0).collect::<Vec<_>>());
            let my = mean(&pts.iter().map(|p| p.1).collect::<Vec<_>>());
            let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
                / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
            assert!((slope + s).abs() < 0.08, "s={s}: slope {slope}");
        }
    }

    #[test]
    fn zipf_scatter_is_a_permutation() {
        for n in [1u64, 2, 7, 1000, 4096] {
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let b = scatter(r, n) as usize;
                assert!(!seen[b]);
                seen[b] = true;
            }
        }
    }

    #[test]
    fn random_offsets_are_aligned_and_in_region() {
        let mut g = OffsetGen::new(
            Pattern::Random {
                dist: Dist::Uniform,
            },
            4096,
            1 << 20,
            8192,
            4096,
            0,
            1,
        );
        let mut rng = Rng::new(5);
        let mut hit_last = false;
        for _ in 0..100_000 {
            let off = g.next(&mut rng);
            assert_eq!(off % 4096, 0);
            assert!(off >= 4096 && off + 8192 <= 4096 + (1 << 20));
            hit_last |= off + 8192 == 4096 + (1 << 20);
        }
        assert!(hit_last);
    }

    #[test]
    fn sequential_forward_and_backward_wrap() {
        let mut rng = Rng::new(6);
        let mut g = OffsetGen::new(
            Pattern::Sequential {
                backward: false,
                stride: 4096,
            },
            0,
            16384,
            4096,
            4096,
            0,
            1,
        );
        let v: Vec<(u64, bool)> = (0..6).map(|_| (g.next(&mut rng), g.wrapped())).collect();
        assert_eq!(
            v,
            [
                (0, false),
                (4096, false),
                (8192, false),
                (12288, false),
                (0, true),
                (4096, false)
            ]
        );
        let mut g = OffsetGen::new(
            Pattern::Sequential {
                backward: true,
                stride: 8192,
            },
            0,
            32768,
            4096,
            4096,
            0,
            1,
        );
        let v: Vec<u64> = (0..5).map(|_| g.next(&mut rng)).collect();
        assert_eq!(v, [24576, 16384, 8192, 0, 24576]);
        // Two threads start half a region apart.
        let mut g = OffsetGen::new(
            Pattern::Sequential {
                backward: false,
                stride: 4096,
            },
            0,
            16384,
            4096,
            4096,
            1,
            2,
        );
        assert_eq!(g.next(&mut rng), 8192);
    }
}

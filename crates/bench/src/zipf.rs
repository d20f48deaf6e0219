//! Key choosers, ported from YCSB's generators so that "zipfian" means here
//! what it means in YCSB's reports.
//!
//! - [`Zipfian`] is YCSB's `ZipfianGenerator` (Gray et al., "Quickly
//!   Generating Billion-Record Synthetic Databases", SIGMOD 1994): item 0 is
//!   the most popular, with `P(i) ≈ 1 / ((i+1)^θ · ζ(n, θ))`, θ = 0.99.
//! - [`ScrambledZipfian`] is YCSB's `ScrambledZipfianGenerator`, what
//!   `requestdistribution=zipfian` actually uses: a zipfian over 10¹⁰ items
//!   (with YCSB's precomputed ζ), hashed with `fnvhash64` and reduced modulo
//!   the item count, so that the popular items are spread over the key space.
//! - [`KeyChooser`] picks between those and a uniform choice.
//!
//! Like YCSB's CoreWorkload, the chooser for `n` records is built over
//! `0..=n` and a draw of `n` is drawn again.

use crate::data::{fnvhash64, Rng64};

/// YCSB's `ZIPFIAN_CONSTANT`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// YCSB's `ScrambledZipfianGenerator.ITEM_COUNT`.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's `ScrambledZipfianGenerator.ZETAN`: ζ(10¹⁰, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// ζ(n, θ) = Σ_{i=1..n} 1 / i^θ (YCSB's `zetastatic` from 0).
pub fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// YCSB's `ZipfianGenerator` over `min..=max`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipfian {
    /// Over `min..=max` with θ = 0.99, computing ζ(n) (O(n), once).
    pub fn new(min: u64, max: u64) -> Self {
        let items = max.saturating_sub(min) + 1;
        Self::with_zetan(min, max, ZIPFIAN_CONSTANT, zeta(items, ZIPFIAN_CONSTANT))
    }

    /// Over `min..=max` with a given θ and precomputed ζ(n, θ).
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Self {
        let items = max.saturating_sub(min) + 1;
        let zeta2theta = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Self {
            base: min,
            items,
            theta,
            zetan,
            alpha,
            eta,
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    /// The item for a uniform draw `u` in `[0, 1)` (YCSB's `nextLong`).
    pub fn value_for(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + self.half_pow_theta {
            return self.base + 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + v.min(self.items - 1)
    }

    /// Draws one item.
    pub fn next(&self, rng: &mut Rng64) -> u64 {
        self.value_for(rng.next_f64())
    }

    /// The exact zipfian probability of item `base + i` (what the
    /// generator approximates).
    pub fn probability(&self, i: u64) -> f64 {
        1.0 / ((i + 1) as f64).powf(self.theta) / self.zetan
    }
}

/// YCSB's `ScrambledZipfianGenerator` over `min..=max`.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    items: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// Over `min..=max` (θ = 0.99, YCSB's precomputed ζ over 10¹⁰ items).
    pub fn new(min: u64, max: u64) -> Self {
        Self {
            min,
            items: max.saturating_sub(min) + 1,
            gen: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// The item for the underlying zipfian's item `z`.
    pub fn scramble(&self, z: u64) -> u64 {
        self.min + (fnvhash64(z as i64) as u64) % self.items
    }

    /// Draws one item.
    pub fn next(&self, rng: &mut Rng64) -> u64 {
        self.scramble(self.gen.next(rng))
    }
}

/// How operations pick a record among `0..records`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// YCSB's `requestdistribution=zipfian` (scrambled).
    Zipfian,
    /// Every record equally likely.
    Uniform,
}

/// A record chooser for one data set.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// Scrambled zipfian over `0..=records`, redrawing `records`.
    Zipfian {
        /// The generator.
        gen: ScrambledZipfian,
        /// Records in the data set.
        records: u64,
    },
    /// Uniform over `0..records`.
    Uniform {
        /// Records in the data set.
        records: u64,
    },
}

impl KeyChooser {
    /// A chooser over `records` records.
    pub fn new(dist: Distribution, records: u64) -> Self {
        let records = records.max(1);
        match dist {
            Distribution::Zipfian => KeyChooser::Zipfian {
                gen: ScrambledZipfian::new(0, records),
                records,
            },
            Distribution::Uniform => KeyChooser::Uniform { records },
        }
    }

    /// A record number in `0..records`.
    pub fn next(&self, rng: &mut Rng64) -> u64 {
        match self {
            KeyChooser::Zipfian { gen, records } => loop {
                let v = gen.next(rng);
                if v < *records {
                    return v;
                }
            },
            KeyChooser::Uniform { records } => rng.below(*records),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ζ(n, θ) for large n: an exact sum to `m`, then Euler–Maclaurin for the tail.
    fn zeta_large(n: f64, theta: f64) -> f64 {
        let m = 1_000_000u64;
        let head = zeta(m, theta);
        let mf = m as f64;
        let integral = (n.powf(1.0 - theta) - mf.powf(1.0 - theta)) / (1.0 - theta);
        let ends = (n.powf(-theta) - mf.powf(-theta)) / 2.0;
        let deriv = (-theta * mf.powf(-theta - 1.0) + theta * n.powf(-theta - 1.0)) / 12.0;
        head + integral + ends - deriv
    }

    #[test]
    fn ycsb_zetan_constant_is_zeta_of_ten_billion() {
        let z = zeta_large(SCRAMBLED_ITEM_COUNT as f64, ZIPFIAN_CONSTANT);
        assert!((z - SCRAMBLED_ZETAN).abs() < 1e-6, "{z}");
    }

    #[test]
    fn zipfian_matches_the_zipf_law_ycsb_targets() {
        let n = 1000u64;
        let z = Zipfian::new(0, n - 1);
        let mut rng = Rng64::new(42);
        let draws = 2_000_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let v = z.next(&mut rng);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        let freq = |i: usize| counts[i] as f64 / draws as f64;
        // Items 0 and 1 are exact in YCSB's algorithm.
        for i in 0..2 {
            let p = z.probability(i as u64);
            assert!((freq(i) - p).abs() < 0.002, "item {i}: {} vs {p}", freq(i));
        }
        // The CDF follows ζ(k)/ζ(n) within Gray et al.'s approximation.
        for k in [10u64, 100, 500] {
            let expected = zeta(k, ZIPFIAN_CONSTANT) / zeta(n, ZIPFIAN_CONSTANT);
            let got: f64 = (0..k as usize).map(freq).sum();
            assert!(
                (got - expected).abs() < 0.03,
                "P(X < {k}) = {got}, zipf law {expected}"
            );
        }
        // Popularity decreases with the item number.
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn zipfian_edges_follow_ycsb_next_long() {
        let z = Zipfian::new(10, 19);
        assert_eq!(z.value_for(0.0), 10);
        let zetan = zeta(10, ZIPFIAN_CONSTANT);
        assert_eq!(z.value_for(0.99 / zetan), 10);
        assert_eq!(z.value_for(1.01 / zetan), 11);
        assert!(z.value_for(0.999_999) <= 19);
    }

    #[test]
    fn scrambled_zipfian_spreads_the_hot_items() {
        let n = 10_000u64;
        let s = ScrambledZipfian::new(0, n - 1);
        let mut rng = Rng64::new(7);
        let draws = 500_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[s.next(&mut rng) as usize] += 1;
        }
        // The hottest key is fnvhash64(0) mod n, drawn with YCSB's P(0) = 1/ζ(10¹⁰).
        let hot = s.scramble(0) as usize;
        let p0 = 1.0 / SCRAMBLED_ZETAN;
        let f = counts[hot] as f64 / draws as f64;
        assert!((f - p0).abs() < 0.005, "{f} vs {p0}");
        assert_eq!(
            counts
                .iter()
                .enumerate()
                .max_by_key(|(_, c)| **c)
                .map(|(i, _)| i),
            Some(hot)
        );
        // Skewed: the 1% hottest keys take at least the 100 hottest zipfian
        // items' share, ζ(100)/ζ(10¹⁰) ≈ 19.6%, far more than 1%.
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top = sorted[..100].iter().sum::<u64>() as f64 / draws as f64;
        let law = zeta(100, ZIPFIAN_CONSTANT) / SCRAMBLED_ZETAN;
        assert!(top > law * 0.95 && top < law + 0.05, "{top} vs {law}");
        // Not ordered: the hot keys are not the low record numbers.
        let low: u64 = counts[..100].iter().sum();
        assert!((low as f64 / draws as f64) < 0.1);
    }

    #[test]
    fn choosers_stay_in_range() {
        let mut rng = Rng64::new(3);
        for dist in [Distribution::Zipfian, Distribution::Uniform] {
            let c = KeyChooser::new(dist, 50);
            let mut seen = std::collections::HashSet::new();
            for _ in 0..20_000 {
                let v = c.next(&mut rng);
                assert!(v < 50);
                seen.insert(v);
            }
            assert!(seen.len() > 30, "{dist:?} covers the records");
        }
    }
}

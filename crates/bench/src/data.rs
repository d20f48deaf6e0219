//! Keys and values of the benchmark's data sets.
//!
//! - The YCSB `usertable`: record `i` has the key `user` + YCSB's
//!   `fnvhash64(i)` (CoreWorkload with `insertorder=hashed`, no zero padding)
//!   and 10 fields `field0`…`field9` of 100 bytes drawn from YCSB's
//!   `RandomByteIterator` character set (printable ASCII from `' '`, so `.`
//!   occurs and the analytic query's `split('.')` has something to split).
//! - The key-value sets of RethinkDB's older reports and YugabyteDB's KV
//!   workload: key `i` and its initial value are shaped by a [`KvShape`].
//!
//! Every loaded value is a pure function of `(record, field)`
//! ([`initial_field`], [`initial_kv_value`]), so a read of a record that was
//! never written during a run can be checked exactly without keeping the data
//! set in memory.

/// Number of payload fields per YCSB record (`fieldcount`).
pub const FIELDS: usize = 10;
/// Bytes per YCSB field (`fieldlength`).
pub const FIELD_LEN: usize = 100;

/// YCSB's 64-bit FNV-1 hash of a key number (`Utils.fnvhash64`): the eight
/// bytes of `val`, low first, then `Math.abs` of the result.
pub fn fnvhash64(val: i64) -> i64 {
    const FNV_OFFSET_BASIS_64: i64 = 0xCBF2_9CE4_8422_2325_u64 as i64;
    const FNV_PRIME_64: i64 = 1_099_511_628_211;
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    // Java's Math.abs leaves Long.MIN_VALUE as it is.
    hash.wrapping_abs()
}

/// YCSB's key of record `i`: `user` + `fnvhash64(i)` in decimal.
pub fn ycsb_key(i: u64) -> String {
    format!("user{}", fnvhash64(i as i64))
}

/// The name of field `f` (`field0`…).
pub fn field_name(f: usize) -> String {
    format!("field{f}")
}

/// A small, fast, seedable generator (SplitMix64): the benchmark client
/// shares the machine with the server, so value generation must be cheap.
#[derive(Debug, Clone)]
pub struct Rng64(u64);

impl Rng64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator seeded from the operating system's randomness.
    pub fn from_entropy() -> Self {
        Self(rand::random())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// A uniform double in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((self.next_u64() as u128 * n as u128) >> 64) as u64
        }
    }

    /// `len` characters of YCSB's `RandomByteIterator` alphabet: each byte is
    /// `(random & 95) + ' '`, i.e. `' '..='?'` and `` '`'..=DEL ``.
    pub fn ycsb_string(&mut self, len: usize) -> String {
        let mut out = String::with_capacity(len);
        let mut bits = 0u64;
        for i in 0..len {
            if i % 8 == 0 {
                bits = self.next_u64();
            }
            let b = ((bits & 95) as u8) + b' ';
            bits >>= 8;
            out.push(char::from(b));
        }
        out
    }
}

/// SplitMix64's finaliser: a bijective mix of 64 bits.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The loaded value of field `f` of YCSB record `i`.
pub fn initial_field(i: u64, f: usize) -> String {
    Rng64::new(mix64(i ^ ((f as u64) << 56) ^ 0x5EED)).ycsb_string(FIELD_LEN)
}

/// The 10 loaded fields of YCSB record `i`.
pub fn initial_record(i: u64) -> Vec<String> {
    (0..FIELDS).map(|f| initial_field(i, f)).collect()
}

/// A cheap 64-bit digest of a value, kept by the correctness checker
/// instead of the value itself.
pub fn digest(s: &str) -> u64 {
    // FNV-1a over the bytes, then mixed.
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix64(h)
}

/// How keys and values of a key-value data set look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KvShape {
    /// Shortest key in bytes.
    pub key_min: usize,
    /// Longest key in bytes.
    pub key_max: usize,
    /// Shortest value in bytes.
    pub value_min: usize,
    /// Longest value in bytes.
    pub value_max: usize,
}

impl KvShape {
    /// RethinkDB's key-value reports: keys of 8–16 bytes, values of 8–128.
    pub const SMALL: KvShape = KvShape {
        key_min: 8,
        key_max: 16,
        value_min: 8,
        value_max: 128,
    };
    /// The durability figures' 1 KB documents: keys of 8–16 bytes, 1000-byte values.
    pub const ONE_KB: KvShape = KvShape {
        key_min: 8,
        key_max: 16,
        value_min: 1000,
        value_max: 1000,
    };
    /// The large-value workload: values of 4–64 KB.
    pub const LARGE: KvShape = KvShape {
        key_min: 8,
        key_max: 16,
        value_min: 4 * 1024,
        value_max: 64 * 1024,
    };
    /// YugabyteDB's KV workload: 40-byte keys, 16-byte values.
    pub const YUGABYTE: KvShape = KvShape {
        key_min: 40,
        key_max: 40,
        value_min: 16,
        value_max: 16,
    };

    /// Key `i`: `i` in hex, zero-padded to a length in `key_min..=key_max`
    /// chosen by a hash of `i`. Distinct `i` give distinct keys (same length
    /// means same padding, so the digits differ).
    pub fn key(&self, i: u64) -> String {
        let span = (self.key_max.saturating_sub(self.key_min) + 1) as u64;
        let width = self.key_min + (mix64(i ^ 0x004B_4559) % span) as usize;
        format!("{i:0width$x}")
    }

    /// A value length in `value_min..=value_max` from random bits.
    pub fn value_len(&self, bits: u64) -> usize {
        let span = (self.value_max.saturating_sub(self.value_min) + 1) as u64;
        self.value_min + (bits % span) as usize
    }

    /// The loaded value of key `i`.
    pub fn initial_value(&self, i: u64) -> String {
        let mut r = Rng64::new(mix64(i ^ 0x0056_414C_5545));
        let len = self.value_len(r.next_u64());
        r.ycsb_string(len)
    }

    /// A fresh random value.
    pub fn random_value(&self, rng: &mut Rng64) -> String {
        let len = self.value_len(rng.next_u64());
        rng.ycsb_string(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn fnv_matches_ycsb_definition() {
        // Hand-computed from Utils.fnvhash64: 8 rounds of xor-then-multiply.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnvhash64(0), (h as i64).wrapping_abs());
        assert!(fnvhash64(1) >= 0 && fnvhash64(12345) >= 0);
        assert_ne!(fnvhash64(1), fnvhash64(2));
        assert!(ycsb_key(7).starts_with("user"));
        let keys: HashSet<String> = (0..100_000).map(ycsb_key).collect();
        assert_eq!(keys.len(), 100_000, "no collisions among the first keys");
    }

    #[test]
    fn fields_are_deterministic_and_ycsb_shaped() {
        let a = initial_field(5, 3);
        assert_eq!(a, initial_field(5, 3));
        assert_ne!(a, initial_field(5, 4));
        assert_ne!(a, initial_field(6, 3));
        assert_eq!(a.len(), FIELD_LEN);
        let r = initial_record(9);
        assert_eq!(r.len(), FIELDS);
        let all: String = (0..200).map(|i| initial_field(i, 0)).collect();
        assert!(all
            .bytes()
            .all(|b| (32..=63).contains(&b) || (96..=127).contains(&b)));
        assert!(all.contains('.'), "the analytic query's separator occurs");
        assert_eq!(digest("abc"), digest("abc"));
        assert_ne!(digest("abc"), digest("abd"));
    }

    #[test]
    fn kv_shapes() {
        let mut seen = HashSet::new();
        for i in 0..20_000 {
            let k = KvShape::SMALL.key(i);
            assert!((8..=16).contains(&k.len()), "{k}");
            assert!(seen.insert(k));
            let v = KvShape::SMALL.initial_value(i);
            assert!((8..=128).contains(&v.len()));
            assert_eq!(v, KvShape::SMALL.initial_value(i));
        }
        assert_eq!(KvShape::YUGABYTE.key(3).len(), 40);
        assert_eq!(KvShape::YUGABYTE.initial_value(3).len(), 16);
        let mut rng = Rng64::new(1);
        let v = KvShape::LARGE.random_value(&mut rng);
        assert!((4096..=65536).contains(&v.len()));
        for _ in 0..1000 {
            assert!(rng.below(10) < 10);
            let f = rng.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
    }
}

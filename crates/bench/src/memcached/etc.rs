//! Facebook's ETC memcached workload (Atikoglu et al., "Workload Analysis of a Large-Scale
//! Key-Value Store", SIGMETRICS 2012) as mutilate models it, and the memcached text protocol
//! the generator speaks.
//!
//! - key size: generalized extreme value, μ = 30.7984, σ = 8.20449, ξ = 0.078688 (bytes),
//!   drawn once per key of the fixed key space, clamped to memcached's 1..=250;
//! - value size: generalized Pareto, μ = 0, σ = 214.476, ξ = 0.348238 (bytes), drawn per set,
//!   clamped to 1..=[`MAX_VALUE`];
//! - inter-arrival: exponential with mean 1/rate (open-loop Poisson arrivals; mutilate's
//!   `fb_ia` is a generalized Pareto fitted to one server's trace, the brief asks for Poisson);
//! - 30 gets to 1 set; keys uniform over the key space (mutilate's default).
//!
//! GEV and generalized Pareto are sampled by inversion of their CDF from a uniform draw
//! (rand_distr has neither); the exponential is `rand_distr::Exp`.

use rand::Rng;
use rand_distr::{Distribution, Exp};

/// GEV location of ETC key sizes, bytes.
pub const KEY_MU: f64 = 30.7984;
/// GEV scale of ETC key sizes, bytes.
pub const KEY_SIGMA: f64 = 8.20449;
/// GEV shape of ETC key sizes.
pub const KEY_XI: f64 = 0.078688;
/// Generalized Pareto scale of ETC value sizes, bytes (location 0).
pub const VALUE_SIGMA: f64 = 214.476;
/// Generalized Pareto shape of ETC value sizes.
pub const VALUE_XI: f64 = 0.348238;
/// Gets per set.
pub const GETS_PER_SET: u32 = 30;
/// memcached's longest key, bytes.
pub const MAX_KEY: usize = 250;
/// The largest value the generator sets, bytes (below memcached's 1 MiB item limit; the
/// generalized Pareto exceeds it with probability below 1e-6).
pub const MAX_VALUE: usize = 500 * 1024;

/// A draw of the generalized extreme value distribution (ξ ≠ 0): μ + σ((−ln u)^(−ξ) − 1)/ξ.
pub fn gev(rng: &mut impl Rng, mu: f64, sigma: f64, xi: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    mu + sigma * ((-u.ln()).powf(-xi) - 1.0) / xi
}

/// A draw of the generalized Pareto distribution (ξ ≠ 0): μ + σ(u^(−ξ) − 1)/ξ.
pub fn gpd(rng: &mut impl Rng, mu: f64, sigma: f64, xi: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    mu + sigma * (u.powf(-xi) - 1.0) / xi
}

/// An ETC key size, bytes (1..=250).
pub fn key_size(rng: &mut impl Rng) -> usize {
    (gev(rng, KEY_MU, KEY_SIGMA, KEY_XI).round() as i64).clamp(1, MAX_KEY as i64) as usize
}

/// An ETC value size, bytes (1..=[`MAX_VALUE`]).
pub fn value_size(rng: &mut impl Rng) -> usize {
    (gpd(rng, 0.0, VALUE_SIGMA, VALUE_XI).round() as i64).clamp(1, MAX_VALUE as i64) as usize
}

/// The fixed key space: key `i` is `k<i in hex>-` padded with `x` to its drawn ETC size (a key
/// whose drawn size is shorter than its unique prefix keeps the prefix: a few keys of the
/// smallest sizes come out longer).
pub fn key_space(rng: &mut impl Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut k = format!("k{i:x}-").into_bytes();
            let size = key_size(rng);
            if k.len() < size {
                k.resize(size, b'x');
            }
            k
        })
        .collect()
}

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `get <key>`.
    Get,
    /// `set <key> 0 0 <bytes>` with a value of that many bytes.
    Set,
}

/// The next request of the mix: a set once in [`GETS_PER_SET`] + 1, else a get, on a uniform
/// key index, with the value size for a set.
pub fn next_request(rng: &mut impl Rng, keys: usize) -> (Op, usize, usize) {
    let key = rng.gen_range(0..keys);
    if rng.gen_range(0..GETS_PER_SET + 1) == 0 {
        (Op::Set, key, value_size(rng))
    } else {
        (Op::Get, key, 0)
    }
}

/// Open-loop Poisson schedule: the send times of successive requests, ns from the start.
pub struct Schedule {
    exp: Exp<f64>,
    next_ns: f64,
}

impl Schedule {
    /// Arrivals at `rate` per second (> 0), the first one an exponential gap after 0.
    pub fn new(rate: f64) -> Schedule {
        Schedule {
            exp: Exp::new(rate / 1e9).unwrap_or_else(|_| Exp::new(1e-9).expect("1e-9 > 0")),
            next_ns: 0.0,
        }
    }

    /// The next send time, ns from the start (nondecreasing).
    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        self.next_ns += self.exp.sample(rng);
        self.next_ns as u64
    }
}

/// Appends request `op` on `key` (a value of `value_len` bytes of `v` for a set) to `out`.
pub fn encode(out: &mut Vec<u8>, op: Op, key: &[u8], value_len: usize) {
    match op {
        Op::Get => {
            out.extend_from_slice(b"get ");
            out.extend_from_slice(key);
            out.extend_from_slice(b"\r\n");
        }
        Op::Set => {
            out.extend_from_slice(b"set ");
            out.extend_from_slice(key);
            out.extend_from_slice(format!(" 0 0 {value_len}\r\n").as_bytes());
            out.resize(out.len() + value_len, b'v');
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A whole response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// `VALUE <key> <flags> <bytes>` with its data, then `END`: a get that hit.
    Hit,
    /// `END` alone: a get that missed.
    Miss,
    /// `STORED`.
    Stored,
    /// `NOT_STORED`, `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...`.
    Error,
}

/// What [`parse`] found at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole response yet: read more.
    Incomplete,
    /// A whole response of `len` bytes.
    Done { reply: Reply, len: usize },
}

/// Parses the response to `op` on `key` at the start of `buf`. Errors (a message) when the
/// bytes are not a response to that request: another key, a malformed header, missing
/// terminators.
pub fn parse(buf: &[u8], op: Op, key: &[u8]) -> Result<Parsed, String> {
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() > MAX_KEY + 64 {
            return Err("a response line longer than any memcached sends".into());
        }
        return Ok(Parsed::Incomplete);
    };
    let line = &buf[..eol];
    let after = eol + 2;
    let is_error = line == b"ERROR"
        || line == b"NOT_STORED"
        || line.starts_with(b"CLIENT_ERROR")
        || line.starts_with(b"SERVER_ERROR");
    if is_error {
        return Ok(Parsed::Done {
            reply: Reply::Error,
            len: after,
        });
    }
    match op {
        Op::Set if line == b"STORED" => Ok(Parsed::Done {
            reply: Reply::Stored,
            len: after,
        }),
        Op::Get if line == b"END" => Ok(Parsed::Done {
            reply: Reply::Miss,
            len: after,
        }),
        Op::Get if line.starts_with(b"VALUE ") => {
            let mut f = line[6..].split(|&b| b == b' ');
            let (k, _flags, bytes) = (f.next(), f.next(), f.next());
            if k != Some(key) {
                return Err(format!(
                    "VALUE for another key: {:?}",
                    String::from_utf8_lossy(line)
                ));
            }
            let bytes: usize = bytes
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|b| b.parse().ok())
                .ok_or_else(|| format!("bad VALUE line {:?}", String::from_utf8_lossy(line)))?;
            let end = after + bytes + 2 + 5;
            if buf.len() < end {
                return Ok(Parsed::Incomplete);
            }
            if &buf[after + bytes..end] != b"\r\nEND\r\n" {
                return Err("VALUE data not followed by \\r\\nEND\\r\\n".into());
            }
            Ok(Parsed::Done {
                reply: Reply::Hit,
                len: end,
            })
        }
        _ => Err(format!(
            "unexpected response {:?} to a {op:?}",
            String::from_utf8_lossy(line)
        )),
    }
}

//! The generator's logic without root: the ETC distributions against their closed-form
//! quantiles over a fixed seed, the 30:1 mix, the Poisson schedule, the protocol parser, and a
//! whole sweep step against a small in-process memcached on loopback that stalls, to see that
//! requests keep going out on schedule (open loop) and that latency counts from the schedule.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_pcg::Pcg64;

use super::etc::{self, Op, Parsed, Reply, Schedule};
use super::load::Generator;

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q) as usize]
}

fn close(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: got {got}, want {want} within {:.1} %",
        rel * 100.0
    );
}

/// Checks `samples`' 10th, 50th, 90th and 99th percentiles against the closed form `want`, each
/// within `rel` (`what` names the distribution in failures).
fn quantiles_close(what: &str, samples: &mut [f64], want: impl Fn(f64) -> f64, rel: f64) {
    for q in [0.1, 0.5, 0.9, 0.99] {
        close(&format!("{what} q{q}"), quantile(samples, q), want(q), rel);
    }
}

#[test]
fn etc_key_sizes_follow_the_gev_quantiles() {
    let mut rng = Pcg64::seed_from_u64(7);
    let mut v: Vec<f64> = (0..200_000)
        .map(|_| etc::gev(&mut rng, etc::KEY_MU, etc::KEY_SIGMA, etc::KEY_XI))
        .collect();
    // GEV quantile: μ + σ((−ln q)^(−ξ) − 1)/ξ.
    let want = |q: f64| {
        etc::KEY_MU + etc::KEY_SIGMA * ((-f64::ln(q)).powf(-etc::KEY_XI) - 1.0) / etc::KEY_XI
    };
    quantiles_close("key size", &mut v, want, 0.02);
    // The published fit: the median key is about 34 bytes.
    close("key median", want(0.5), 33.9, 0.01);
    let mut rng = Pcg64::seed_from_u64(7);
    let keys = etc::key_space(&mut rng, 5_000);
    assert!(keys.iter().all(|k| (1..=etc::MAX_KEY).contains(&k.len())));
    assert!(keys.iter().all(|k| k.iter().all(|b| b.is_ascii_graphic())));
    let mut uniq = keys.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), keys.len(), "keys must be distinct");
}

#[test]
fn etc_value_sizes_follow_the_generalized_pareto_quantiles() {
    let mut rng = Pcg64::seed_from_u64(11);
    let mut v: Vec<f64> = (0..200_000)
        .map(|_| etc::gpd(&mut rng, 0.0, etc::VALUE_SIGMA, etc::VALUE_XI))
        .collect();
    let want = |q: f64| etc::VALUE_SIGMA * ((1.0 - q).powf(-etc::VALUE_XI) - 1.0) / etc::VALUE_XI;
    quantiles_close("value size", &mut v, want, 0.04);
    close("value median", want(0.5), 168.1, 0.01);
    let mut rng = Pcg64::seed_from_u64(11);
    assert!((0..100_000)
        .map(|_| etc::value_size(&mut rng))
        .all(|s| (1..=etc::MAX_VALUE).contains(&s)));
}

#[test]
fn etc_mix_is_thirty_gets_per_set_over_uniform_keys() {
    let mut rng = Pcg64::seed_from_u64(3);
    let n = 310_000;
    let mut sets = 0;
    let mut per_key = [0u32; 10];
    for _ in 0..n {
        let (op, key, len) = etc::next_request(&mut rng, 10);
        per_key[key] += 1;
        if op == Op::Set {
            sets += 1;
            assert!(len >= 1);
        }
    }
    close("sets", sets as f64, n as f64 / 31.0, 0.05);
    for c in per_key {
        close("requests per key", c as f64, n as f64 / 10.0, 0.03);
    }
}

#[test]
fn schedule_gaps_are_exponential_at_the_rate() {
    let mut rng = Pcg64::seed_from_u64(5);
    let mut s = Schedule::new(100_000.0);
    let mut prev = 0u64;
    let gaps: Vec<f64> = (0..100_000)
        .map(|_| {
            let t = s.next(&mut rng);
            assert!(t >= prev);
            let g = (t - prev) as f64;
            prev = t;
            g
        })
        .collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
    close("mean gap ns", mean, 10_000.0, 0.02);
    // Exponential: the standard deviation equals the mean (evenly spaced sends would give 0).
    close("gap sd / mean", sd / mean, 1.0, 0.03);
}

#[test]
fn parse_reads_each_reply_and_waits_for_whole_ones() {
    let hit = b"VALUE abc 0 5\r\nhello\r\nEND\r\n";
    for cut in 0..hit.len() {
        assert_eq!(
            etc::parse(&hit[..cut], Op::Get, b"abc"),
            Ok(Parsed::Incomplete),
            "cut {cut}"
        );
    }
    assert_eq!(
        etc::parse(hit, Op::Get, b"abc"),
        Ok(Parsed::Done {
            reply: Reply::Hit,
            len: hit.len()
        })
    );
    assert_eq!(
        etc::parse(b"END\r\nSTORED\r\n", Op::Get, b"abc"),
        Ok(Parsed::Done {
            reply: Reply::Miss,
            len: 5
        })
    );
    assert_eq!(
        etc::parse(b"STORED\r\n", Op::Set, b"abc"),
        Ok(Parsed::Done {
            reply: Reply::Stored,
            len: 8
        })
    );
    assert_eq!(
        etc::parse(b"SERVER_ERROR out of memory\r\n", Op::Set, b"abc"),
        Ok(Parsed::Done {
            reply: Reply::Error,
            len: 28
        })
    );
    assert!(etc::parse(b"VALUE abd 0 5\r\nhello\r\nEND\r\n", Op::Get, b"abc").is_err());
    assert!(etc::parse(b"VALUE abc 0 5\r\nhello!!END\r\n", Op::Get, b"abc").is_err());
    assert!(etc::parse(b"STORED\r\n", Op::Get, b"abc").is_err());
    let mut out = Vec::new();
    etc::encode(&mut out, Op::Set, b"k1", 3);
    etc::encode(&mut out, Op::Get, b"k1", 0);
    assert_eq!(out, b"set k1 0 0 3\r\nvvv\r\nget k1\r\n");
}

#[test]
fn proc_net_counter_reads_the_value_under_its_name() {
    let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                Tcp: RtoAlgorithm RtoMin RetransSegs\nTcp: 1 200 17\n";
    assert_eq!(
        super::load::proc_net_counter(snmp, "Tcp:", "RetransSegs"),
        Some(17)
    );
    assert_eq!(
        super::load::proc_net_counter(snmp, "Ip:", "DefaultTTL"),
        Some(64)
    );
    assert_eq!(super::load::proc_net_counter(snmp, "Tcp:", "Nope"), None);
}

/// A tiny memcached (get and set, text protocol) on loopback. Until `stall_until` it reads
/// and queues requests without answering; it counts the requests it read during the stall.
struct Fake {
    port: u16,
    read_in_stall: Arc<AtomicU64>,
    sets: Arc<AtomicU64>,
    stall_until: Arc<Mutex<Instant>>,
}

impl Fake {
    fn start() -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let store: Arc<Mutex<HashMap<Vec<u8>, usize>>> = Arc::default();
        let read_in_stall = Arc::new(AtomicU64::new(0));
        let sets = Arc::new(AtomicU64::new(0));
        let stall_until = Arc::new(Mutex::new(Instant::now()));
        let (st, ris, se, su) = (
            store.clone(),
            read_in_stall.clone(),
            sets.clone(),
            stall_until.clone(),
        );
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let (st, ris, se, su) = (st.clone(), ris.clone(), se.clone(), su.clone());
                std::thread::spawn(move || serve(s, &st, &ris, &se, &su));
            }
        });
        Fake {
            port,
            read_in_stall,
            sets,
            stall_until,
        }
    }
}

fn serve(
    mut s: TcpStream,
    store: &Mutex<HashMap<Vec<u8>, usize>>,
    read_in_stall: &AtomicU64,
    sets: &AtomicU64,
    stall_until: &Mutex<Instant>,
) {
    s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    let mut inbuf = Vec::new();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => inbuf.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
        let stalled = Instant::now() < *stall_until.lock().unwrap();
        while let Some(eol) = inbuf.windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&inbuf[..eol]).to_string();
            let f: Vec<&str> = line.split(' ').collect();
            let used = match f[0] {
                "get" => {
                    match store.lock().unwrap().get(f[1].as_bytes()) {
                        Some(&n) => {
                            out.extend_from_slice(format!("VALUE {} 0 {n}\r\n", f[1]).as_bytes());
                            out.resize(out.len() + n, b'v');
                            out.extend_from_slice(b"\r\nEND\r\n");
                        }
                        None => out.extend_from_slice(b"END\r\n"),
                    }
                    eol + 2
                }
                "set" => {
                    let n: usize = f[4].parse().unwrap();
                    if inbuf.len() < eol + 2 + n + 2 {
                        break;
                    }
                    store.lock().unwrap().insert(f[1].as_bytes().to_vec(), n);
                    sets.fetch_add(1, Ordering::Relaxed);
                    out.extend_from_slice(b"STORED\r\n");
                    eol + 2 + n + 2
                }
                _ => {
                    out.extend_from_slice(b"ERROR\r\n");
                    eol + 2
                }
            };
            if stalled {
                read_in_stall.fetch_add(1, Ordering::Relaxed);
            }
            inbuf.drain(..used);
        }
        if !stalled && !out.is_empty() {
            if s.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
    }
}

#[test]
fn generator_keeps_sending_on_schedule_while_the_server_stalls() {
    let fake = Fake::start();
    let target = format!("127.0.0.1:{}", fake.port).parse().unwrap();
    let mut g = Generator::connect(target, 8, 500, 1, Duration::from_secs(5)).unwrap();
    g.preload(16, Duration::from_secs(10)).unwrap();
    assert_eq!(fake.sets.load(Ordering::Relaxed), 500, "every key set once");

    // A step with a healthy server: every get hits, every set is stored.
    let me = [std::process::id()];
    let (s, _) = g.step(0, 4000.0, 0.5, 1.0, &me, None).unwrap();
    close(
        "requests at 4000/s for 0.5 s",
        s.requests as f64,
        2000.0,
        0.15,
    );
    assert_eq!(s.completed, s.requests);
    assert_eq!(s.unanswered, 0);
    assert_eq!(s.misses + s.errors, 0, "{s:?}");
    assert_eq!(s.hits + s.stored, s.completed);
    assert!(s.stored > 0 && s.hits > 20 * s.stored, "30:1 mix: {s:?}");
    assert!(s.server_cpu_s >= 0.0);
    assert!(g.quiesce(Duration::from_secs(1)).unwrap());

    // The server answers nothing for 300 ms: an open-loop generator keeps sending (a closed
    // loop would stop at one request per connection), and the wait counts in the latency.
    *fake.stall_until.lock().unwrap() = Instant::now() + Duration::from_millis(300);
    let (s, _) = g.step(1, 4000.0, 0.5, 2.0, &me, None).unwrap();
    let in_stall = fake.read_in_stall.load(Ordering::Relaxed);
    assert!(
        in_stall > 600,
        "only {in_stall} requests reached the server during the stall (about 1200 are due)"
    );
    assert_eq!(s.completed, s.requests, "{s:?}");
    assert!(
        s.max_us > 250_000.0 && s.p50_us > 20_000.0,
        "the stall must show in the latency from the schedule: {s:?}"
    );
}

#[test]
fn qps_p99_curve_is_drawn_with_its_text() {
    let step = |qps: f64, p99: f64| -> super::load::Step {
        serde_json::from_value(serde_json::json!({
            "offered_qps": qps, "requests": 1, "completed": 1, "unanswered": 0,
            "achieved_qps": qps, "p50_us": p99 / 2.0, "p99_us": p99, "p999_us": p99,
            "max_us": p99, "send_lag_p99_us": 0.0, "hits": 1, "misses": 0, "stored": 0,
            "errors": 0, "server_cpu_s": 0.0, "cpu_us_per_req": 1.0
        }))
        .unwrap()
    };
    let steps = vec![step(10_000.0, 60.0), step(20_000.0, 900.0)];
    let row = super::RowResult::of(crate::harness::shim::Row::Linux, steps, 500.0);
    let path = std::env::temp_dir().join(format!("mc-plot-{}.svg", std::process::id()));
    super::plot::draw(&path, &[row], 500.0).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        svg.contains("p99 latency vs achieved QPS"),
        "caption missing"
    );
    assert!(svg.contains("Linux"), "legend missing");
}

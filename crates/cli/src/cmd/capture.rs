//! `corestack capture`: the frames running corestack engines receive and send, copied by the
//! engines into their capture rings while this runs (`observe::capture`), filtered in the
//! engine, written as pcap (`-w FILE`) or printed one line per frame (naming the engine,
//! `e<N>`, that received or sent it when a process captured runs several).

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use observe::capture::{write_pcap, CaptureControl, Direction, FilterOp, Frame, CAPTURE};
use observe::observer_shm::find_segments;

/// `capture` options.
#[derive(Args, Debug)]
pub struct Capture {
    /// Only the engine(s) of this process (default: every running corestack process).
    #[arg(long)]
    pid: Option<u32>,
    /// Write the frames to this pcap file (tcpdump -r, tshark -r) instead of printing them.
    #[arg(short = 'w', value_name = "FILE.pcap")]
    write: Option<std::path::PathBuf>,
    /// Stop after this many frames.
    #[arg(short = 'c', value_name = "COUNT")]
    count: Option<usize>,
    /// Stop after this many seconds (default: at COUNT frames or Ctrl-C).
    #[arg(long)]
    seconds: Option<f64>,
    /// Filter, applied in the engine: host A (IPv4 or IPv6), port N, tcp, udp, icmp, icmp6,
    /// arp, joined with and, or, not and parentheses (e.g. `tcp and port 7`,
    /// `host fd00::2 and tcp`).
    filter: Vec<String>,
}

impl Capture {
    pub fn run(self) -> Result<()> {
        let filter = parse_filter(&self.filter)?;
        if let Some(s) = self.seconds {
            if !(s > 0.0 && s <= 86400.0) {
                bail!("--seconds must be between 0 and 86400");
            }
        }
        let mut pids = Vec::new();
        let mut controls = Vec::new();
        for (pid, path) in find_segments(CAPTURE) {
            if self.pid.is_some_and(|p| p != pid) {
                continue;
            }
            match CaptureControl::open(&path) {
                Ok(c) => {
                    pids.push(pid);
                    controls.push(c);
                }
                Err(e) if self.pid.is_some() => {
                    bail!(
                        "cannot capture pid {pid} ({}: {e}); run as its user or root",
                        path.display()
                    )
                }
                Err(_) => {}
            }
        }
        if controls.is_empty() {
            match self.pid {
                None => bail!("no running corestack engine to capture from (start one first)"),
                Some(p) => bail!("no corestack engine in pid {p} to capture from (is it running?)"),
            }
        }
        // Several engines in a process: each line names its frame's engine.
        let engines = pids
            .iter()
            .any(|&p| observe::stats_shm::engine_segments(p, observe::stats_shm::STATS).len() > 1);
        let stop = cmdline::stop_flag()?;
        let dropped0: u64 = controls.iter().map(|c| c.dropped()).sum();
        let mut frames: Vec<Frame> = Vec::new();
        for c in &controls {
            c.drain(&mut Vec::new()); // frames of an earlier session
            c.start(&filter)?;
        }
        eprintln!(
            "capturing from pid {pids:?}{}",
            if self.filter.is_empty() {
                String::new()
            } else {
                format!(", filter: {}", self.filter.join(" "))
            }
        );
        let start = Instant::now();
        let limit = self.seconds.map(Duration::from_secs_f64);
        let mut printed = 0;
        loop {
            for c in &controls {
                c.drain(&mut frames);
            }
            if let Some(n) = self.count {
                frames.truncate(n);
            }
            if self.write.is_none() {
                for f in &frames[printed..] {
                    println!("{}", describe(f, engines));
                }
                printed = frames.len();
            }
            let done = self.count.is_some_and(|n| frames.len() >= n)
                || limit.is_some_and(|l| start.elapsed() >= l)
                || stop.load(Ordering::Acquire);
            if done {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for c in &controls {
            c.stop();
        }
        let dropped = controls.iter().map(|c| c.dropped()).sum::<u64>() - dropped0;
        if let Some(path) = &self.write {
            let mut out = std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("creating {}", path.display()))?,
            );
            write_pcap(&mut out, &frames).with_context(|| format!("writing {}", path.display()))?;
            out.flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        eprintln!(
            "{} frames captured{}, {dropped} dropped (capture ring full)",
            frames.len(),
            self.write
                .as_ref()
                .map_or(String::new(), |p| format!(" to {}", p.display()))
        );
        Ok(())
    }
}

/// One line for a frame, like tcpdump's; with `engine`, the engine that
/// received or sent it (`e1`) after the time.
fn describe(f: &Frame, engine: bool) -> String {
    let d = &f.data;
    let dir = match f.dir {
        Direction::In => "in ",
        Direction::Out => "out",
    };
    let secs = f.time_ns / 1_000_000_000;
    let t = format!(
        "{:02}:{:02}:{:02}.{:06}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60,
        f.time_ns % 1_000_000_000 / 1000
    );
    let be16 = |o: usize| d.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let ip = |o: usize| {
        d.get(o..o + 4)
            .map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    };
    let what = match be16(12) {
        Some(0x86dd) => describe_ipv6(d),
        Some(0x0806) => format!(
            "ARP {} > {}",
            ip(28).map_or("?".into(), |a| a.to_string()),
            ip(38).map_or("?".into(), |a| a.to_string())
        ),
        Some(0x0800) => {
            let ihl = usize::from(d.get(14).copied().unwrap_or(0x45) & 0x0f) * 4;
            let (src, dst) = (ip(26), ip(30));
            let l4 = 14 + ihl;
            let (sp, dp) = (be16(l4), be16(l4 + 2));
            let addr = |a: Option<Ipv4Addr>, p: Option<u16>| match (a, p) {
                (Some(a), Some(p)) => format!("{a}.{p}"),
                (Some(a), None) => a.to_string(),
                _ => "?".into(),
            };
            match d.get(23) {
                Some(6) => format!(
                    "IP {} > {}: tcp [{}]",
                    addr(src, sp),
                    addr(dst, dp),
                    tcp_flags(d, l4)
                ),
                Some(17) => format!("IP {} > {}: udp", addr(src, sp), addr(dst, dp)),
                Some(1) => format!("IP {} > {}: icmp", addr(src, None), addr(dst, None)),
                Some(p) => format!("IP {} > {}: proto {p}", addr(src, None), addr(dst, None)),
                None => "IP (truncated)".into(),
            }
        }
        Some(t) => format!("ethertype 0x{t:04x}"),
        None => "(truncated)".into(),
    };
    let t = if engine {
        format!("{t} e{}", f.engine)
    } else {
        t
    };
    format!("{t} {dir} {what}, length {}", f.orig_len)
}

/// TCP's flags at `l4` as tcpdump names them (`S`, `F`, `R`, `P`, `.`).
fn tcp_flags(d: &[u8], l4: usize) -> String {
    let flags = d.get(l4 + 13).copied().unwrap_or(0);
    [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x10, '.'),
    ]
    .iter()
    .filter(|(b, _)| flags & b != 0)
    .map(|(_, c)| *c)
    .collect()
}

/// An IPv6 frame's line, as tcpdump writes it: `IP6 SRC.PORT > DST.PORT: tcp [S.]` (the
/// upper layer directly after the fixed header; otherwise its next header's number).
fn describe_ipv6(d: &[u8]) -> String {
    let ip = |o: usize| {
        d.get(o..o + 16)
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .map(Ipv6Addr::from)
    };
    let (Some(src), Some(dst), Some(&next)) = (ip(22), ip(38), d.get(20)) else {
        return "IP6 (truncated)".into();
    };
    let l4 = 54;
    let port = |o: usize| d.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let addr = |a: Ipv6Addr, p: Option<u16>| match p {
        Some(p) => format!("{a}.{p}"),
        None => a.to_string(),
    };
    let (sp, dp) = (port(l4), port(l4 + 2));
    match next {
        6 => format!(
            "IP6 {} > {}: tcp [{}]",
            addr(src, sp),
            addr(dst, dp),
            tcp_flags(d, l4)
        ),
        17 => format!("IP6 {} > {}: udp", addr(src, sp), addr(dst, dp)),
        58 => {
            let kind = match d.get(l4) {
                Some(128) => "echo request",
                Some(129) => "echo reply",
                Some(135) => "neighbor solicitation",
                Some(136) => "neighbor advertisement",
                _ => "icmp6",
            };
            format!("IP6 {src} > {dst}: ICMP6, {kind}")
        }
        p => format!("IP6 {src} > {dst}: next header {p}"),
    }
}

/// Parses a filter (`host A` with an IPv4 or IPv6 address, `port N`, `tcp`, `udp`, `icmp`,
/// `icmp6`, `arp`, `and`/`&&`, `or`/`||`, `not`/`!`, parentheses) into the engine's postfix
/// program.
pub fn parse_filter(words: &[String]) -> Result<Vec<FilterOp>> {
    let mut tokens: Vec<String> = Vec::new();
    for w in words {
        let spaced = w.replace('(', " ( ").replace(')', " ) ");
        tokens.extend(spaced.split_whitespace().map(str::to_lowercase));
    }
    if tokens.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut at = 0;
    expr(&tokens, &mut at, &mut out)?;
    if at != tokens.len() {
        bail!("filter: unexpected `{}` (terms: host A, port N, tcp, udp, icmp, icmp6, arp; and, or, not, parentheses)", tokens[at]);
    }
    if out.iter().map(|op| op.words()).sum::<usize>() > observe::capture::FILTER_OPS {
        bail!(
            "filter: at most {} terms and operators (an IPv6 host counts 3)",
            observe::capture::FILTER_OPS
        );
    }
    Ok(out)
}

fn expr(t: &[String], at: &mut usize, out: &mut Vec<FilterOp>) -> Result<()> {
    infix(t, at, out, ["or", "||"], FilterOp::Or, term)
}

fn term(t: &[String], at: &mut usize, out: &mut Vec<FilterOp>) -> Result<()> {
    infix(t, at, out, ["and", "&&"], FilterOp::And, factor)
}

/// One level of a left-associative infix operator: operands parsed by `operand`, joined by
/// either of `words`, each join emitting `op` after both operands (postfix).
fn infix(
    t: &[String],
    at: &mut usize,
    out: &mut Vec<FilterOp>,
    words: [&str; 2],
    op: FilterOp,
    operand: fn(&[String], &mut usize, &mut Vec<FilterOp>) -> Result<()>,
) -> Result<()> {
    operand(t, at, out)?;
    while t.get(*at).is_some_and(|w| words.contains(&w.as_str())) {
        *at += 1;
        operand(t, at, out)?;
        out.push(op);
    }
    Ok(())
}

fn factor(t: &[String], at: &mut usize, out: &mut Vec<FilterOp>) -> Result<()> {
    let Some(w) = t.get(*at) else {
        bail!("filter: a term is missing at the end");
    };
    *at += 1;
    match w.as_str() {
        "not" | "!" => {
            factor(t, at, out)?;
            out.push(FilterOp::Not);
        }
        "(" => {
            expr(t, at, out)?;
            if t.get(*at).map(String::as_str) != Some(")") {
                bail!("filter: `(` without `)`");
            }
            *at += 1;
        }
        "host" | "port" => {
            let Some(v) = t.get(*at) else {
                bail!("filter: `{w}` needs a value");
            };
            *at += 1;
            out.push(if w == "host" {
                match v.parse::<IpAddr>().with_context(|| {
                    format!("filter: `host {v}`: not an IPv4 or IPv6 address")
                })? {
                    IpAddr::V4(a) => FilterOp::Host(a),
                    IpAddr::V6(a) => FilterOp::Host6(a),
                }
            } else {
                FilterOp::Port(
                    v.parse()
                        .with_context(|| format!("filter: `port {v}`: not a port number"))?,
                )
            });
        }
        "tcp" => out.push(FilterOp::Tcp),
        "udp" => out.push(FilterOp::Udp),
        "icmp" => out.push(FilterOp::Icmp),
        "icmp6" => out.push(FilterOp::Icmp6),
        "arp" => out.push(FilterOp::Arp),
        other => bail!(
            "filter: unknown term `{other}` (host A, port N, tcp, udp, icmp, icmp6, arp; and, or, not)"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use FilterOp::*;

    #[test]
    fn describe_names_the_engine_only_when_asked() {
        let f = Frame {
            time_ns: 3_723_000_004_000,
            dir: Direction::In,
            orig_len: 10,
            data: vec![0; 10],
            engine: 2,
        };
        assert_eq!(
            describe(&f, false),
            "01:02:03.000004 in  (truncated), length 10"
        );
        assert_eq!(
            describe(&f, true),
            "01:02:03.000004 e2 in  (truncated), length 10"
        );
    }

    #[test]
    fn describe_prints_ipv6_addresses_ports_and_icmp6() {
        let mut d = vec![0u8; 14 + 40 + 20];
        d[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        d[20] = 6;
        d[22..38].copy_from_slice(&"fd00:1::1".parse::<Ipv6Addr>().unwrap().octets());
        d[38..54].copy_from_slice(&"fd00:1::2".parse::<Ipv6Addr>().unwrap().octets());
        d[54..56].copy_from_slice(&40000u16.to_be_bytes());
        d[56..58].copy_from_slice(&7u16.to_be_bytes());
        d[67] = 0x12;
        let f = |data: Vec<u8>| Frame {
            time_ns: 0,
            dir: Direction::Out,
            orig_len: data.len(),
            data,
            engine: 0,
        };
        assert_eq!(
            describe(&f(d.clone()), false),
            "00:00:00.000000 out IP6 fd00:1::1.40000 > fd00:1::2.7: tcp [S.], length 74"
        );
        d[20] = 58;
        d[54] = 135;
        assert!(describe(&f(d.clone()), false)
            .contains("IP6 fd00:1::1 > fd00:1::2: ICMP6, neighbor solicitation"));
        assert!(describe(&f(d[..40].to_vec()), false).contains("IP6 (truncated)"));
    }

    fn p(s: &str) -> Result<Vec<FilterOp>> {
        parse_filter(&s.split(' ').map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn filter_words_become_postfix_with_and_binding_tighter_than_or() {
        assert_eq!(p("tcp and port 7").unwrap(), vec![Tcp, Port(7), And]);
        assert_eq!(
            p("udp or tcp and not port 22").unwrap(),
            vec![Udp, Tcp, Port(22), Not, And, Or]
        );
        assert_eq!(
            p("(udp or tcp) and host 10.0.0.1").unwrap(),
            vec![Udp, Tcp, Or, Host(Ipv4Addr::new(10, 0, 0, 1)), And]
        );
        assert!(parse_filter(&[]).unwrap().is_empty());
        assert!(p("port").is_err());
        assert!(p("host 10.0.0").is_err());
        assert!(p("host fd00::2::3").is_err());
        assert_eq!(
            p("host fd00::2 and icmp6").unwrap(),
            vec![Host6("fd00::2".parse().unwrap()), Icmp6, And]
        );
        // 7 IPv6 hosts joined by 6 ors take 21 + 6 = 27 words: more than 23.
        let seven = ["host fd00::1"; 7].join(" or ");
        assert!(p(&seven).is_err());
        let three = ["host fd00::1"; 3].join(" or ");
        assert_eq!(p(&three).unwrap().len(), 5);
        assert!(p("tcp udp").is_err());
        assert!(p("(tcp").is_err());
        assert!(p("smtp").is_err());
    }
}

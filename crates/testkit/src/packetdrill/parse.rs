//! The packetdrill script language, the subset the suite uses: one event a line, each a time
//! and an inbound packet (`<`), an expected outbound packet (`>`), a socket call, or a `%{ }%`
//! assertion block. `//` starts a comment.
//!
//! ```text
//! 0     socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
//! +0    listen(3, 1) = 0
//! +0    < S 0:0(0) win 65535 <mss 1460,sackOK,nop,nop,TS val 100 ecr 0,nop,wscale 7>
//! +0    > S. 0:0(0) ack 1 <mss 1460,sackOK,TS val 0 ecr 100,nop,wscale 9>
//! +.1   < icmp unreachable frag_needed mtu 1000 [1:1449(1448)]
//! +0    %{ assert tcpi_snd_mss == 948 }%
//! ```
//!
//! Times: `N` is seconds since the script's start, `+N` seconds after the previous event, `*`
//! any time (an outbound packet at whatever time it comes). Packets: flags (`S` SYN, `F` FIN,
//! `R` RST, `P` PSH, `.` ACK, `E` ECE, `W` CWR, `U` URG), `start:end(len)` sequence numbers
//! relative to the sender's ISN, then `ack N`, `win N` and `<options>` in any order. Options:
//! `mss N`, `wscale N`, `sackOK`, `TS val N ecr N` (`ecr *`: not checked), `sack A:B C:D`,
//! `nop`, `eol`.

use core::fmt;

/// One parsed event.
#[derive(Debug, Clone)]
pub struct Event {
    /// 1-based line number in the script.
    pub line: usize,
    /// When it happens.
    pub time: Time,
    /// What happens.
    pub kind: Kind,
}

/// An event's time as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Time {
    /// Seconds since the script's start.
    Absolute(f64),
    /// Seconds after the previous event.
    Relative(f64),
    /// Any time (outbound packets only).
    Any,
}

/// What an event does.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A segment the peer sends to the stack.
    Inbound(Packet),
    /// A segment the stack must send.
    Outbound(Packet),
    /// An ICMP Fragmentation Needed from a router quoting the stack's segment `quoted`.
    FragNeeded {
        /// The next-hop MTU it reports, bytes.
        mtu: u16,
        /// The stack's segment it quotes (by its relative start).
        quoted: Packet,
    },
    /// A socket call and its expected result.
    Call(Call),
    /// Assertions on the connection's state, each `name op value`.
    Assert(Vec<Assertion>),
}

/// A TCP segment as a script writes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Packet {
    /// Control bits, as `wire::tcp::TcpFlags` has them.
    pub flags: u8,
    /// First sequence number, relative to the sender's ISN.
    pub seq: u32,
    /// Payload bytes.
    pub len: u32,
    /// The acknowledgment number, relative to the receiver's ISN (with the ACK bit).
    pub ack: Option<u32>,
    /// The window field as carried (unscaled).
    pub win: Option<u16>,
    /// The options, None when the line has no `<...>`.
    pub options: Option<Vec<Opt>>,
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Opt {
    /// Maximum segment size.
    Mss(u16),
    /// Window scale shift.
    WScale(u8),
    /// SACK permitted.
    SackOk,
    /// Timestamps: TSval and TSecr (None: not checked).
    Ts(u32, Option<u32>),
    /// SACK blocks, relative to the receiver's ISN (at most 4).
    Sack([(u32, u32); 4], u8),
    /// No-operation (padding; not compared).
    Nop,
    /// End of options (not compared).
    Eol,
}

/// A socket call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call's name: socket, bind, listen, accept, connect, write, read, close, shutdown,
    /// setsockopt.
    pub name: String,
    /// Its arguments as written (`...` for the ones not read).
    pub args: Vec<String>,
    /// The value it must return.
    pub ret: i64,
    /// The errno name it must fail with when `ret` is -1 (`EAGAIN`, ...).
    pub errno: Option<String>,
}

/// `name op value` in a `%{ }%` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    /// `tcpi_*`, or `stat.NAME` for an engine counter.
    pub name: String,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`.
    pub op: String,
    /// The integer it is compared with (state names are numbers too).
    pub value: i64,
}

/// A parse error: the line and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

/// The header a script starts with: the RFC sections it checks (`// RFC 9293 §3.5 ...` on
/// its first line), whether Linux runs it unchanged (`// linux: yes`), and the timing
/// tolerance (`// tolerance_usecs: N`, default 4000 as packetdrill's).
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The first line's text after `// `, which names the RFC and section.
    pub source: String,
    /// The RFC number of the first line (`RFC 9293` → 9293).
    pub rfc: u32,
    /// True when the script is marked as one the Linux kernel also passes.
    pub linux: bool,
    /// How far an outbound packet may come from its time, µs.
    pub tolerance_us: u64,
}

/// Parses a script: its header and its events.
pub fn parse(text: &str) -> Result<(Header, Vec<Event>), ParseError> {
    let header = header(text)?;
    let mut events = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, raw)) = lines.next() {
        let line = i + 1;
        let mut s = strip_comment(raw).trim().to_string();
        if s.is_empty() {
            continue;
        }
        // A `%{ ... }%` block may span lines.
        if s.contains("%{") && !s.contains("}%") {
            for (_, more) in lines.by_ref() {
                s.push(' ');
                s.push_str(strip_comment(more).trim());
                if more.contains("}%") {
                    break;
                }
            }
        }
        let err = |what: String| ParseError { line, what };
        let (t, rest) = s
            .split_once(char::is_whitespace)
            .ok_or_else(|| err(format!("no event after the time: {s:?}")))?;
        let time = time(t).ok_or_else(|| err(format!("bad time {t:?}")))?;
        let rest = rest.trim();
        let kind = if let Some(p) = rest.strip_prefix('<') {
            let p = p.trim();
            if let Some(icmp) = p.strip_prefix("icmp") {
                frag_needed(icmp.trim()).map_err(err)?
            } else {
                Kind::Inbound(packet(p).map_err(err)?)
            }
        } else if let Some(p) = rest.strip_prefix('>') {
            Kind::Outbound(packet(p.trim()).map_err(err)?)
        } else if let Some(b) = rest.strip_prefix("%{") {
            let b = b
                .trim_end()
                .strip_suffix("}%")
                .ok_or_else(|| err("no }%".into()))?;
            Kind::Assert(assertions(b).map_err(err)?)
        } else {
            Kind::Call(call(rest).map_err(err)?)
        };
        if time == Time::Any && !matches!(kind, Kind::Outbound(_)) {
            return Err(err("`*` is for outbound packets only".into()));
        }
        events.push(Event { line, time, kind });
    }
    Ok((header, events))
}

fn strip_comment(s: &str) -> &str {
    s.find("//").map_or(s, |i| &s[..i])
}

fn header(text: &str) -> Result<Header, ParseError> {
    let first = text.lines().next().unwrap_or("");
    let err = |what: &str| ParseError {
        line: 1,
        what: what.into(),
    };
    let source = first
        .strip_prefix("// ")
        .ok_or_else(|| err("the first line must be `// RFC NNNN §x.y: what it checks`"))?;
    let rfc = source
        .strip_prefix("RFC ")
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| err("the first line must name the RFC: `// RFC NNNN §x.y: ...`"))?;
    let mut linux = false;
    let mut tolerance_us = 4000;
    for l in text.lines().take_while(|l| l.starts_with("//")) {
        if let Some(v) = l.strip_prefix("// linux:") {
            linux = v.trim() == "yes";
        }
        if let Some(v) = l.strip_prefix("// tolerance_usecs:") {
            tolerance_us = v.trim().parse().map_err(|_| err("bad tolerance_usecs"))?;
        }
    }
    Ok(Header {
        source: source.to_string(),
        rfc,
        linux,
        tolerance_us,
    })
}

fn time(t: &str) -> Option<Time> {
    if t == "*" {
        return Some(Time::Any);
    }
    let (rel, num) = match t.strip_prefix('+') {
        Some(n) => (true, n),
        None => (false, t),
    };
    let v: f64 = num.parse().ok()?;
    if !(v >= 0.0 && v.is_finite()) {
        return None;
    }
    Some(if rel {
        Time::Relative(v)
    } else {
        Time::Absolute(v)
    })
}

fn num<T: core::str::FromStr>(s: Option<&str>, what: &str) -> Result<T, String> {
    let s = s.ok_or_else(|| format!("{what}: a number is missing"))?;
    s.trim_end_matches(',')
        .parse()
        .map_err(|_| format!("{what}: {s:?} is not a number"))
}

/// `FLAGS start:end(len) [ack N] [win N] [<opts>]`.
fn packet(s: &str) -> Result<Packet, String> {
    let (main, opts) = match s.find('<') {
        Some(i) => {
            let o = s[i + 1..]
                .trim_end()
                .strip_suffix('>')
                .ok_or("options: no closing >")?;
            (&s[..i], Some(options(o)?))
        }
        None => (s, None),
    };
    let mut it = main.split_whitespace();
    let flags = it.next().ok_or("no flags")?;
    let mut p = Packet {
        options: opts,
        ..Packet::default()
    };
    for c in flags.chars() {
        p.flags |= match c {
            'S' => 0x02,
            'F' => 0x01,
            'R' => 0x04,
            'P' => 0x08,
            '.' => 0x10,
            'U' => 0x20,
            'E' => 0x40,
            'W' => 0x80,
            _ => return Err(format!("unknown flag {c:?} in {flags:?}")),
        };
    }
    let range = it.next().ok_or("no start:end(len)")?;
    let (start, rest) = range.split_once(':').ok_or("no start:end(len)")?;
    let (end, len) = rest.split_once('(').ok_or("no (len)")?;
    let len = len.strip_suffix(')').ok_or("no (len)")?;
    p.seq = num(Some(start), "start")?;
    let end: u32 = num(Some(end), "end")?;
    p.len = num(Some(len), "len")?;
    if end.wrapping_sub(p.seq) != p.len {
        return Err(format!("{range}: end - start is not len"));
    }
    while let Some(k) = it.next() {
        match k {
            "ack" => p.ack = Some(num(it.next(), "ack")?),
            "win" => p.win = Some(num(it.next(), "win")?),
            _ => return Err(format!("unknown field {k:?}")),
        }
    }
    if (p.flags & 0x10 != 0) != p.ack.is_some() {
        return Err("an ACK (.) needs `ack N`, and `ack N` needs the ACK flag".into());
    }
    Ok(p)
}

fn options(s: &str) -> Result<Vec<Opt>, String> {
    let mut out = Vec::new();
    for o in s.split(',') {
        let mut it = o.split_whitespace();
        let Some(k) = it.next() else { continue };
        out.push(match k {
            "mss" => Opt::Mss(num(it.next(), "mss")?),
            "wscale" => Opt::WScale(num(it.next(), "wscale")?),
            "sackOK" => Opt::SackOk,
            "nop" => Opt::Nop,
            "eol" => Opt::Eol,
            "TS" => {
                if it.next() != Some("val") {
                    return Err("TS val N ecr N".into());
                }
                let val = num(it.next(), "TS val")?;
                if it.next() != Some("ecr") {
                    return Err("TS val N ecr N".into());
                }
                let ecr = match it.next() {
                    Some("*") => None,
                    e => Some(num(e, "TS ecr")?),
                };
                Opt::Ts(val, ecr)
            }
            "sack" => {
                let mut blocks = [(0, 0); 4];
                let mut n = 0u8;
                for b in it.by_ref() {
                    let (l, r) = b.split_once(':').ok_or("sack A:B ...")?;
                    if n == 4 {
                        return Err("at most 4 SACK blocks".into());
                    }
                    blocks[usize::from(n)] = (num(Some(l), "sack")?, num(Some(r), "sack")?);
                    n += 1;
                }
                Opt::Sack(blocks, n)
            }
            _ => return Err(format!("unknown option {k:?}")),
        });
        if it.next().is_some() {
            return Err(format!("option {o:?}: too many fields"));
        }
    }
    Ok(out)
}

/// `unreachable frag_needed mtu N [start:end(len)]`.
fn frag_needed(s: &str) -> Result<Kind, String> {
    let rest = s
        .strip_prefix("unreachable frag_needed mtu")
        .ok_or("icmp: only `unreachable frag_needed mtu N [start:end(len)]`")?;
    let (mtu, quoted) = rest.split_once('[').ok_or("icmp: no [start:end(len)]")?;
    let quoted = quoted.trim().strip_suffix(']').ok_or("icmp: no ]")?;
    let mtu = num(Some(mtu.trim()), "mtu")?;
    // The quoted segment: flags do not matter, ACK is set as the stack's data has it.
    let q = packet(&format!(". {quoted} ack 0"))?;
    Ok(Kind::FragNeeded { mtu, quoted: q })
}

/// `name(args) = ret [ERRNO (text)]`.
fn call(s: &str) -> Result<Call, String> {
    let open = s.find('(').ok_or("a socket call: name(args) = ret")?;
    let close = s.rfind(") =").ok_or("a socket call needs `= ret`")?;
    let eq_at = close + 2;
    let name = s[..open].trim().to_string();
    let args = split_args(&s[open + 1..close]);
    let mut rhs = s[eq_at + 1..].split_whitespace();
    let ret = num(rhs.next(), "result")?;
    let errno = rhs.next().map(str::to_string);
    if (ret == -1) != errno.is_some() {
        return Err("-1 needs an errno name after it, and only -1 has one".into());
    }
    Ok(Call {
        name,
        args,
        ret,
        errno,
    })
}

/// Splits on top-level commas (not inside `[...]` or `{...}`).
fn split_args(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// `assert NAME OP VALUE`, separated by `;` or new lines.
fn assertions(s: &str) -> Result<Vec<Assertion>, String> {
    let mut out = Vec::new();
    for part in s
        .split([';', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let body = part
            .strip_prefix("assert ")
            .ok_or("each line is `assert NAME OP VALUE`")?;
        let mut it = body.split_whitespace();
        let (Some(name), Some(op), Some(value), None) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(format!("`assert NAME OP VALUE`: {body:?}"));
        };
        if !["==", "!=", "<", "<=", ">", ">="].contains(&op) {
            return Err(format!("unknown operator {op:?}"));
        }
        let value = state_value(value)
            .or_else(|| value.parse().ok())
            .ok_or_else(|| format!("{value:?} is not a number or a TCP_ state"))?;
        out.push(Assertion {
            name: name.to_string(),
            op: op.to_string(),
            value,
        });
    }
    Ok(out)
}

/// Linux's `tcpi_state` numbers (include/net/tcp_states.h).
pub fn state_value(name: &str) -> Option<i64> {
    Some(match name {
        "TCP_ESTABLISHED" => 1,
        "TCP_SYN_SENT" => 2,
        "TCP_SYN_RECV" => 3,
        "TCP_FIN_WAIT1" => 4,
        "TCP_FIN_WAIT2" => 5,
        "TCP_TIME_WAIT" => 6,
        "TCP_CLOSE" => 7,
        "TCP_CLOSE_WAIT" => 8,
        "TCP_LAST_ACK" => 9,
        "TCP_LISTEN" => 10,
        "TCP_CLOSING" => 11,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind_of_event() {
        let text = "// RFC 9293 §3.5: a handshake\n// linux: yes\n\
            0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
            +0 setsockopt(3, SOL_TCP, TCP_NODELAY, [1], 4) = 0\n\
            +0.1 < S 0:0(0) win 65535 <mss 1460,sackOK,nop,nop,TS val 100 ecr 0,nop,wscale 7>\n\
            * > S. 0:0(0) ack 1 <mss 1460,TS val 0 ecr *>\n\
            +0 read(4, ..., 10) = -1 EAGAIN (Resource temporarily unavailable)\n\
            +0 %{ assert tcpi_state == TCP_ESTABLISHED; assert tcpi_snd_cwnd >= 10 }%\n\
            +0 < icmp unreachable frag_needed mtu 1000 [1:1449(1448)]\n";
        let (h, ev) = parse(text).unwrap();
        assert_eq!((h.rfc, h.linux, h.tolerance_us), (9293, true, 4000));
        assert_eq!(ev.len(), 7);
        assert_eq!(ev[2].time, Time::Relative(0.1));
        let Kind::Inbound(p) = &ev[2].kind else {
            panic!("{:?}", ev[2])
        };
        assert_eq!((p.flags, p.win), (0x02, Some(65535)));
        assert_eq!(p.options.as_ref().unwrap()[4], Opt::Ts(100, Some(0)));
        let Kind::Outbound(p) = &ev[3].kind else {
            panic!()
        };
        assert_eq!((p.flags, p.ack, ev[3].time), (0x12, Some(1), Time::Any));
        let Kind::Call(c) = &ev[4].kind else { panic!() };
        assert_eq!((c.ret, c.errno.as_deref()), (-1, Some("EAGAIN")));
        let Kind::Assert(a) = &ev[5].kind else {
            panic!()
        };
        assert_eq!(a[0].value, 1);
        assert_eq!(a[1].op, ">=");
        let Kind::FragNeeded { mtu, quoted } = &ev[6].kind else {
            panic!()
        };
        assert_eq!((*mtu, quoted.seq, quoted.len), (1000, 1, 1448));
    }

    #[test]
    fn refuses_what_it_cannot_read_naming_the_line() {
        let bad = [
            ("0 < S 0:10(0) win 1", "end - start"),
            ("0 < . 1:1(0) win 1", "needs `ack N`"),
            ("0 > X 0:0(0)", "unknown flag"),
            ("0 close(3)", "= ret"),
            ("x close(3) = 0", "bad time"),
            ("* close(3) = 0", "outbound packets only"),
            ("0 %{ tcpi_rto == 1 }%", "assert"),
        ];
        for (line, want) in bad {
            let e = parse(&format!("// RFC 9293 §3: x\n{line}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{line}");
            assert!(e.what.contains(want), "{line}: {e}");
        }
        assert!(parse("no header\n").is_err());
    }
}

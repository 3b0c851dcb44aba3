//! The sink protocol between `corestack bench stream` (the writer) and `corestack serve sink`
//! (the reader): the writer sends, then half-closes; the sink reads and discards and, at the
//! writer's FIN, answers one line, `sink: BYTES bytes NANOS ns\n` (what it received and how
//! long from accept to FIN), and closes.

use std::io;
use std::time::Duration;

/// Bytes per write and per read.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Goodput in Mbit/s of `bytes` in `secs` (0 when no time passed).
pub fn mbit_per_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / 1e6 / secs
    } else {
        0.0
    }
}

/// The sink's answer to the writer's FIN: `bytes` received in `elapsed`.
pub fn report_line(bytes: u64, elapsed: Duration) -> String {
    format!("sink: {bytes} bytes {} ns\n", elapsed.as_nanos())
}

/// Parses [`report_line`]'s output: (bytes, ns); None for any other text.
pub fn parse_report(line: &str) -> Option<(u64, u64)> {
    let mut w = line.split_whitespace();
    if w.next()? != "sink:" {
        return None;
    }
    let bytes = w.next()?.parse().ok()?;
    if w.next()? != "bytes" {
        return None;
    }
    let ns = w.next()?.parse().ok()?;
    (w.next()? == "ns").then_some((bytes, ns))
}

/// True for the errors that mean "not now" (nonblocking, a socket timeout, a signal).
pub fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line_round_trips_through_parse() {
        let line = report_line(123_456, Duration::from_nanos(789));
        assert_eq!(parse_report(&line), Some((123_456, 789)));
    }

    #[test]
    fn parse_report_with_other_text_is_none() {
        assert_eq!(parse_report("hello world"), None);
        assert_eq!(parse_report("sink: 12 bytes"), None);
        assert_eq!(parse_report("sink: x bytes 5 ns"), None);
    }

    #[test]
    fn mbit_per_s_of_zero_time_is_zero() {
        assert_eq!(mbit_per_s(1000, 0.0), 0.0);
        assert!((mbit_per_s(125_000, 1.0) - 1.0).abs() < 1e-9);
    }
}

//! `corestack bench transfer`: a checked echo transfer, on the kernel stack or (with `--iface
//! --ip`) on corestack.
//!
//! It sends `--bytes` of seeded pseudo-random data to an echo server while reading the echo
//! back, and compares the sha256 of what was sent with that of what came back. With
//! `--progress-ms`, it also prints a JSON line of the bytes sent and received so far at that
//! interval (`bench echo-matrix` watches them to tell a stalled connection).

use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use sha2::{Digest, Sha256};

use cmdline::{connect_error, set_kernel_cc, StackOpts, Stream, Waiter};

/// Transfer chunk size, bytes.
const CHUNK_BYTES: usize = 64 * 1024;
/// How long a kernel-stack transfer may take to connect (the SYN is sent again after 1 and 3 s,
/// so a lossy path gets two more tries).
const TRANSFER_CONNECT: Duration = Duration::from_secs(10);

/// `bench transfer` options.
#[derive(Args, Debug)]
pub struct Transfer {
    /// Echo server address, IPv4 or IPv6 (`[fd00::2]:7`).
    #[arg(long, value_name = "IP:PORT")]
    target: SocketAddr,
    /// Bytes to send (and expect back).
    #[arg(long, default_value_t = 100 << 20)]
    bytes: u64,
    /// Seed of the pseudo-random data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    #[command(flatten)]
    out: crate::plot::Outputs,
    /// Kernel stack: the socket's congestion control (TCP_CONGESTION), e.g. cubic; default:
    /// the system's.
    #[arg(long, value_name = "NAME")]
    kernel_cc: Option<String>,
    /// Also print `{"progress":{"bytes_sent":N,"bytes_received":N,"seconds":S}}` on stdout at
    /// this interval, ms (0: never).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    progress_ms: u64,
    #[command(flatten)]
    stack: StackOpts,
}

/// What a transfer did (the `--json` object).
#[derive(Debug, Serialize)]
struct TransferReport {
    stack: String,
    target: String,
    bytes_sent: u64,
    bytes_received: u64,
    sent_sha256: String,
    received_sha256: String,
    equal: bool,
    seconds: f64,
    mbytes_per_s: f64,
}

/// Seeded pseudo-random bytes (xorshift64*), the same for a seed on every run.
pub struct DataGen(u64);

impl DataGen {
    /// A generator for `seed` (0 is replaced by a fixed non-zero state).
    pub fn new(seed: u64) -> DataGen {
        DataGen(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// Fills `buf` with the next bytes of the sequence.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

impl Transfer {
    pub fn run(self) -> Result<()> {
        let earlier = self.out.check()?;
        if !(self.timeout > 0.0 && self.timeout <= 3600.0) {
            bail!("--timeout must be in (0, 3600] seconds");
        }
        let deadline = Instant::now() + Duration::from_secs_f64(self.timeout);
        let target = self.target;
        let progress = (self.progress_ms > 0).then(|| Duration::from_millis(self.progress_ms));
        let t0 = Instant::now();
        let (sent, received) = if self.stack.wants_corestack() {
            let stack = self.stack.start()?;
            let mut s = corestack::TcpStream::connect(&stack, target)
                .map_err(|e| connect_error(e, target))?;
            echo_transfer(
                &mut s,
                &self.stack.waiter(&stack),
                self.bytes,
                self.seed,
                deadline,
                progress,
            )?
        } else {
            let connect = TRANSFER_CONNECT.min(deadline.saturating_duration_since(Instant::now()));
            let mut s = std::net::TcpStream::connect_timeout(&target, connect)
                .map_err(|e| connect_error(e, target))?;
            if let Some(cc) = &self.kernel_cc {
                set_kernel_cc(&s, cc)?;
            }
            echo_transfer(
                &mut s,
                &Waiter::Kernel,
                self.bytes,
                self.seed,
                deadline,
                progress,
            )?
        };
        let secs = t0.elapsed().as_secs_f64();
        let report = TransferReport {
            stack: self.stack.describe(),
            target: target.to_string(),
            bytes_sent: sent.0,
            bytes_received: received.0,
            equal: sent == received,
            sent_sha256: sent.1,
            received_sha256: received.1,
            seconds: secs,
            mbytes_per_s: received.0 as f64 / 1e6 / secs,
        };
        let what = ("echo transfer goodput", "MB/s", "mbytes_per_s");
        let bar = (report.stack.as_str(), report.mbytes_per_s);
        self.out.emit_bar(&report, &earlier, what, bar)?;
        if !self.out.json_on_stdout() {
            println!(
                "sent {} bytes, received {} bytes in {:.2} s ({:.1} MB/s)\nsha256 sent     {}\nsha256 received {}\n{}",
                report.bytes_sent,
                report.bytes_received,
                secs,
                report.mbytes_per_s,
                report.sent_sha256,
                report.received_sha256,
                if report.equal { "equal" } else { "DIFFERENT" }
            );
        }
        if !report.equal {
            bail!("the echoed data differs from what was sent");
        }
        Ok(())
    }
}

/// Sends `bytes` of seeded data and reads the echo concurrently on one nonblocking socket;
/// returns (bytes, sha256 hex) for what was sent and what was received. Prints a progress line
/// every `report_every` if given.
fn echo_transfer<S: Stream>(
    s: &mut S,
    waiter: &Waiter,
    bytes: u64,
    seed: u64,
    deadline: Instant,
    report_every: Option<Duration>,
) -> Result<((u64, String), (u64, String))> {
    s.nonblocking(true)?;
    let t0 = Instant::now();
    let mut next_report = t0;
    let mut gen = DataGen::new(seed);
    let mut out = vec![0u8; CHUNK_BYTES];
    let mut out_len = 0usize;
    let mut out_off = 0usize;
    let mut inbuf = vec![0u8; CHUNK_BYTES];
    let (mut sent, mut received) = (0u64, 0u64);
    let (mut sent_hash, mut recv_hash) = (Sha256::new(), Sha256::new());
    let mut shut = false;
    loop {
        let mut progress = false;
        if out_off == out_len && sent < bytes {
            out_len =
                usize::try_from((bytes - sent).min(CHUNK_BYTES as u64)).unwrap_or(CHUNK_BYTES);
            gen.fill(&mut out[..out_len]);
            sent_hash.update(&out[..out_len]);
            out_off = 0;
        }
        if out_off < out_len {
            match s.write(&out[out_off..out_len]) {
                Ok(n) => {
                    out_off += n;
                    sent += n as u64;
                    progress |= n > 0;
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => bail!("sending after {sent} bytes: {e}"),
            }
        } else if sent == bytes && !shut {
            s.shutdown_write()
                .context("shutting down the sending side")?;
            shut = true;
        }
        match s.read(&mut inbuf) {
            Ok(0) => break,
            Ok(n) => {
                recv_hash.update(&inbuf[..n]);
                received += n as u64;
                progress = true;
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => bail!("receiving after {received} bytes: {e}"),
        }
        if received >= bytes && shut {
            break;
        }
        if let Some(every) = report_every {
            let now = Instant::now();
            if now >= next_report {
                print_progress(sent, received, now - t0);
                next_report = now + every;
            }
        }
        if Instant::now() >= deadline {
            bail!("transfer timed out after {sent} bytes sent, {received} received");
        }
        if !progress {
            waiter.wait(Duration::from_millis(1))?;
        } else if let Waiter::Core { .. } = waiter {
            waiter.spin()?;
        }
    }
    let hex = |h: Sha256| {
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    Ok(((sent, hex(sent_hash)), (received, hex(recv_hash))))
}

/// One `--progress-ms` line; stdout is flushed so a reader of a pipe sees it at once.
fn print_progress(sent: u64, received: u64, elapsed: Duration) {
    let line = serde_json::json!({
        "progress": {
            "bytes_sent": sent,
            "bytes_received": received,
            "seconds": elapsed.as_secs_f64(),
        }
    });
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagen_same_seed_gives_same_bytes_across_chunkings() {
        let mut a = DataGen::new(7);
        let mut whole = [0u8; 64];
        a.fill(&mut whole);
        let mut b = DataGen::new(7);
        let mut parts = [0u8; 64];
        b.fill(&mut parts[..32]);
        b.fill(&mut parts[32..]);
        assert_eq!(whole, parts);
        let mut c = DataGen::new(8);
        let mut other = [0u8; 64];
        c.fill(&mut other);
        assert_ne!(whole, other);
    }
}

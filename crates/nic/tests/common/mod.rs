//! Test helpers: root check, namespace and link guards, re-running one test
//! inside a namespace, and hand-built frames.
#![allow(dead_code)]

pub mod alloc;
pub mod conformance;

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Fails (never skips) when not root: these tests need namespaces, veth,
/// XDP and packet sockets.
pub fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?");
    assert_eq!(
        uid, "0",
        "this test needs root (network namespaces, veth, XDP, packet sockets): run `sudo -E cargo test -p nic`"
    );
}

/// The message of the error that `result` must hold, printed after `what`
/// (which also names the call in the panic when it succeeded); the error must
/// be of `kind`, and its message one line (as `nic::Error` promises) holding
/// each of `says`.
pub fn refusal<T: std::fmt::Debug>(
    result: Result<T, nic::Error>,
    what: &str,
    kind: nic::ErrorKind,
    says: &[&str],
) -> String {
    let err = result.expect_err(what);
    let msg = err.to_string();
    println!("{what}: {msg}");
    assert_eq!(err.kind(), kind, "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    for s in says {
        assert!(msg.contains(s), "{what}: {msg:?} does not say {s:?}");
    }
    msg
}

/// Runs a shell command, panicking with its output when it fails.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a shell command and returns whether it succeeded.
pub fn sh_ok(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} >/dev/null 2>&1"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A short name unique to this process and call: `<prefix><pid><n>`.
pub fn unique(prefix: &str) -> String {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}{n}", std::process::id())
}

/// A network namespace deleted on drop (with everything in it).
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(prefix: &str) -> Netns {
        let name = unique(prefix);
        sh(&format!("ip netns add {name}"));
        let ns = Netns { name };
        ns.exec("ip link set lo up");
        ns
    }

    /// The namespace `name` created by an outer test, not deleted on drop.
    pub fn existing(name: String) -> std::mem::ManuallyDrop<Netns> {
        std::mem::ManuallyDrop::new(Netns { name })
    }

    /// Runs `cmd` inside the namespace, panicking on failure.
    pub fn exec(&self, cmd: &str) -> String {
        sh(&format!("ip netns exec {} sh -c '{}'", self.name, cmd))
    }

    /// Runs `cmd` inside the namespace; whether it succeeded.
    pub fn exec_ok(&self, cmd: &str) -> bool {
        sh_ok(&format!("ip netns exec {} sh -c '{}'", self.name, cmd))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Offloads off, as a real NIC presents frames.
pub fn offloads_off(ns: &Netns, ifname: &str) {
    ns.exec(&format!(
        "ethtool -K {ifname} tx off tso off gso off gro off >/dev/null 2>&1 || true"
    ));
}

/// A veth pair `a` (in `ns_a`) <-> `b` (in `ns_b`), both up, IPv6 off,
/// offloads off.
pub fn veth_between(ns_a: &Netns, a: &str, ns_b: &Netns, b: &str) {
    sh(&format!(
        "ip link add {a} netns {} type veth peer name {b} netns {}",
        ns_a.name, ns_b.name
    ));
    for (ns, ifname) in [(ns_a, a), (ns_b, b)] {
        ns.exec(&format!(
            "sysctl -qw net.ipv6.conf.{ifname}.disable_ipv6=1 && ip link set {ifname} up"
        ));
        offloads_off(ns, ifname);
    }
}

/// The env var that marks the inner run of a test re-executed in a namespace.
pub const INNER: &str = "NIC_TEST_INNER";

/// Whether this process is the inner run of `test`.
pub fn is_inner(test: &str) -> bool {
    std::env::var(INNER).ok().as_deref() == Some(test)
}

/// Re-runs test `test` inside namespace `ns` with `envs`; panics if it fails.
pub fn run_inner(ns: &Netns, test: &str, envs: &[(&str, String)]) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name])
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(INNER, test);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let status = cmd.status().expect("spawn inner test");
    assert!(
        status.success(),
        "inner run of {test} in {} failed",
        ns.name
    );
}

/// An env var set by `run_inner`.
pub fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("{key} not set by the outer test"))
}

/// Polls `f` until it returns Some, for at most `timeout`.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// Reads an interface counter (e.g. "rx_packets") in a namespace.
pub fn counter(ns: &Netns, ifname: &str, name: &str) -> u64 {
    ns.exec(&format!("cat /sys/class/net/{ifname}/statistics/{name}"))
        .trim()
        .parse()
        .expect("counter")
}

/// Parses "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(s: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(s.trim().split(':')) {
        *m = u8::from_str_radix(p, 16).expect("mac");
    }
    mac
}

pub fn fmt_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Writes an ARP request (RFC 826) for `target_ip` from `mac`/`ip` into
/// `buf`; returns its length (42 bytes).
pub fn arp_request(buf: &mut [u8], mac: [u8; 6], ip: [u8; 4], target_ip: [u8; 4]) -> usize {
    let f = &mut buf[..42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip);
    f[32..38].copy_from_slice(&[0; 6]);
    f[38..42].copy_from_slice(&target_ip);
    42
}

/// Writes an ARP reply from `mac`/`ip` to `to_mac`/`to_ip`.
pub fn arp_reply(
    buf: &mut [u8],
    mac: [u8; 6],
    ip: [u8; 4],
    to_mac: [u8; 6],
    to_ip: [u8; 4],
) -> usize {
    let f = &mut buf[..42];
    f[0..6].copy_from_slice(&to_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip);
    f[32..38].copy_from_slice(&to_mac);
    f[38..42].copy_from_slice(&to_ip);
    42
}

/// If `frame` is an ARP reply from `from_ip` to `to_mac`, the sender MAC.
pub fn arp_reply_from(frame: &[u8], from_ip: [u8; 4], to_mac: [u8; 6]) -> Option<[u8; 6]> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x06] || frame[20..22] != [0, 2] {
        return None;
    }
    if frame[28..32] != from_ip || frame[32..38] != to_mac {
        return None;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&frame[22..28]);
    Some(mac)
}

/// If `frame` is an ARP request for `target_ip`, the sender MAC and IP.
pub fn arp_request_for(frame: &[u8], target_ip: [u8; 4]) -> Option<([u8; 6], [u8; 4])> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x06] || frame[20..22] != [0, 1] {
        return None;
    }
    if frame[38..42] != target_ip {
        return None;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&frame[22..28]);
    let mut ip = [0u8; 4];
    ip.copy_from_slice(&frame[28..32]);
    Some((mac, ip))
}

/// If `frame` is an ICMP echo request (RFC 792) to `dst_ip`, its id and seq.
pub fn icmp_echo_request_to(frame: &[u8], dst_ip: [u8; 4]) -> Option<(u16, u16)> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    if frame[23] != 1 || frame[30..34] != dst_ip || frame.len() < 14 + ihl + 8 {
        return None;
    }
    let icmp = &frame[14 + ihl..];
    if icmp[0] != 8 {
        return None;
    }
    Some((
        u16::from_be_bytes([icmp[4], icmp[5]]),
        u16::from_be_bytes([icmp[6], icmp[7]]),
    ))
}

/// A test frame of `len` bytes (>= 18) with ethertype 0x88b5 (IEEE local
/// experimental) and `seq` in bytes 14..18.
pub fn test_frame(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> usize {
    let f = &mut buf[..len];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_add(seq as u8);
    }
    len
}

/// The sequence number of a test frame, if `frame` is one.
pub fn test_frame_seq(frame: &[u8]) -> Option<u32> {
    if frame.len() < 18 || frame[12..14] != [0x88, 0xb5] {
        return None;
    }
    Some(u32::from_be_bytes([
        frame[14], frame[15], frame[16], frame[17],
    ]))
}

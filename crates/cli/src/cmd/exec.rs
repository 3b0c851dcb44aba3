//! `corestack exec`: runs an unmodified program on corestack through the sockets shim
//! (`libcorestack_preload.so`, LD_PRELOAD).
//!
//! Embedded mode (`--iface IF --ip ADDR/PREFIX`, `--ip` once per family): the program's
//! process starts its own engine on the interface the first time one of its sockets goes to
//! corestack. Service mode
//! (`--socket PATH`) joins a `corestack run` daemon: its sockets live on the daemon's engine.
//!
//! A program that forks with corestack sockets open (a pre-forking or daemonizing master, a
//! fork-per-connection server) cannot be served by an engine that lives in one of its
//! processes: in embedded and inline mode the shim moves it to service mode by itself, with a
//! private daemon (`corestack run --private-for PID`, this executable, named to the shim by
//! `CORESTACK_EXEC_BIN`) on the same interface, and starts it again in place (see the shim's
//! `switch` module and docs/shim.md).
//!
//! The shim is `CORESTACK_PRELOAD` if set, else `libcorestack_preload.so` next to this binary.
//! It is added to LD_PRELOAD (kept in front of whatever the environment already preloads), the
//! CORESTACK_* variables are set, and this process is replaced by the program (exec), so its
//! pid, signals and exit status are the program's own.
//!
//! A program LD_PRELOAD cannot reach is refused before it runs, with one `error:` line: a
//! statically linked ELF executable (no PT_INTERP: the dynamic loader, which does the
//! preloading, never runs) and a Go program (a `.note.go.buildid` or `.go.buildinfo` section:
//! Go makes its system calls itself, not through libc, even when linked dynamically for cgo).
//! Either would silently run on the kernel's stack. So is a program with liburing linked into
//! the executable (an executable segment holds an inline `io_uring_setup` system call): the shim
//! refuses io_uring through libc's `syscall()` and a shared liburing, but cannot see these, and
//! an io_uring server would miss corestack's connections. That check reads the executable only
//! (not the libraries it loads) and knows the instruction sequences liburing compiles to on
//! x86-64 and AArch64 (the number 425 put in the system-call register, the system call
//! instruction within 32 bytes); a ring made by other inline code still reaches the kernel.

use std::ffi::OsString;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

use cmdline::IpCidr;
use corestack::Driver;

/// `exec` options.
#[derive(Args, Debug)]
pub struct Exec {
    /// Interface corestack drives (embedded mode).
    #[arg(long, value_name = "IF", requires = "ip", conflicts_with = "socket")]
    iface: Option<String>,
    /// corestack's address and prefix, IPv4 (e.g. 10.77.1.2/24) or IPv6 (e.g. fd00:1::2/64);
    /// give it once per family for a dual-stack corestack (an IPv4 address is required;
    /// embedded mode).
    #[arg(long, value_name = "ADDR/PREFIX", requires = "iface")]
    ip: Vec<IpCidr>,
    /// Port driver (embedded mode).
    #[arg(long, value_enum, default_value_t = Driver::AfXdp)]
    driver: Driver,
    /// Default gateway for destinations off the subnet, IPv4 or IPv6 (once per family;
    /// embedded mode).
    #[arg(long, value_name = "ADDR")]
    gateway: Vec<IpAddr>,
    /// Inline mode: no engine thread; the program's waiting threads run the engine.
    #[arg(long)]
    inline: bool,
    /// Engines (embedded and inline mode), one per NIC queue group; a flow belongs to the
    /// engine its Toeplitz hash picks. Default 1.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=255))]
    cores: u16,
    /// CPUs for the engine threads (embedded mode), as `taskset -c` writes them (`2-3`):
    /// engine i runs on the i-th, cycling (CORESTACK_ENGINE_CPUS for the program).
    #[arg(long, value_name = "LIST", value_parser = cmdline::cpu_list)]
    cpus: Option<cmdline::CpuList>,
    /// Service mode: the control socket of a `corestack run` daemon.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    command: Vec<OsString>,
}

/// The shim: `CORESTACK_PRELOAD`, else `libcorestack_preload.so` beside this executable.
fn preload_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CORESTACK_PRELOAD").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "CORESTACK_PRELOAD={} does not exist: build it with `cargo build --release`",
                p.display()
            );
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("finding the corestack executable")?;
    let dir = exe
        .parent()
        .context("the corestack executable has no directory")?;
    let p = dir.join("libcorestack_preload.so");
    if !p.is_file() {
        bail!(
            "{} not found: build the workspace (`cargo build --release` builds the shim next to corestack) or set CORESTACK_PRELOAD",
            p.display()
        );
    }
    Ok(p)
}

impl Exec {
    pub fn run(self) -> Result<()> {
        let shim = preload_path()?;
        let (program, args) = self
            .command
            .split_first()
            .context("give the program to run after `--`")?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        let mut preload = OsString::from(&shim);
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
            preload.push(":");
            preload.push(old);
        }
        cmd.env("LD_PRELOAD", preload);
        match (&self.iface, self.ip.is_empty(), &self.socket) {
            (Some(iface), false, None) => {
                let (ip4, ip6) = self.addresses()?;
                // A program that forks with corestack sockets open is moved to service mode
                // with a private daemon, started with this executable (see the shim's
                // `switch` module).
                let me = std::env::current_exe().context("finding the corestack executable")?;
                cmd.env("CORESTACK_EXEC_BIN", me);
                cmd.env("CORESTACK_IFACE", iface)
                    .env("CORESTACK_IP", ip4)
                    .env_remove("CORESTACK_SOCKET")
                    .env("CORESTACK_DRIVER", self.driver.name())
                    .env("CORESTACK_INLINE", if self.inline { "1" } else { "0" })
                    .env("CORESTACK_CORES", self.cores.to_string());
                let gw4 = self.gateway.iter().find(|g| g.is_ipv4());
                let gw6 = self.gateway.iter().find(|g| g.is_ipv6());
                if let Some(c) = &self.cpus {
                    let list: Vec<String> = c.0.iter().map(usize::to_string).collect();
                    cmd.env("CORESTACK_ENGINE_CPUS", list.join(","));
                }
                for (var, value) in [
                    ("CORESTACK_IP6", ip6),
                    ("CORESTACK_GATEWAY", gw4.map(IpAddr::to_string)),
                    ("CORESTACK_GATEWAY6", gw6.map(IpAddr::to_string)),
                ] {
                    match value {
                        Some(v) => cmd.env(var, v),
                        None => cmd.env_remove(var),
                    };
                }
            }
            (None, true, Some(path)) => {
                cmd.env("CORESTACK_SOCKET", path)
                    .env_remove("CORESTACK_IFACE")
                    .env_remove("CORESTACK_EXEC_BIN")
                    .env_remove("CORESTACK_PRIVATE_DAEMON");
            }
            _ => bail!(
                "give --iface IF --ip ADDR/PREFIX (embedded mode) or --socket PATH (service mode)"
            ),
        }
        if let Some(path) = resolve(program) {
            if let Some(why) = unreachable_by_preload(&path) {
                bail!(
                    "{} {why}: the sockets shim (LD_PRELOAD) cannot interpose its socket calls, so it would run on the kernel's stack, not corestack",
                    path.display()
                );
            }
        }
        let err = cmd.exec();
        Err(err).with_context(|| format!("cannot run {}", program.to_string_lossy()))
    }
}

impl Exec {
    /// `CORESTACK_IP` and `CORESTACK_IP6` from `--ip`: the IPv4 address (required) and the
    /// IPv6 one (prefix length 64 unless given), each at most once.
    fn addresses(&self) -> Result<(String, Option<String>)> {
        let (mut ip4, mut ip6) = (None, None);
        for ip in &self.ip {
            match ip {
                IpCidr::V4(c) => {
                    let prefix = c
                        .prefix
                        .context("--ip needs a prefix length, e.g. 10.77.1.2/24")?;
                    if ip4.replace(format!("{}/{prefix}", c.addr)).is_some() {
                        bail!("--ip takes one IPv4 address (and one IPv6 address)");
                    }
                }
                IpCidr::V6(a, p) => {
                    if ip6.replace(format!("{a}/{}", p.unwrap_or(64))).is_some() {
                        bail!("--ip takes one IPv6 address (and one IPv4 address)");
                    }
                }
            }
        }
        let ip4 = ip4.context("an IPv4 --ip ADDR/PREFIX is required (e.g. --ip 10.77.1.2/24)")?;
        Ok((ip4, ip6))
    }
}

/// Where `exec` finds `program`: itself when it names a path (has a `/`), else the first
/// executable file of that name in PATH. None: not found (exec then says so).
fn resolve(program: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Why the shim cannot reach the program at `path`: "is statically linked", "is a Go
/// program" or "makes io_uring system calls itself"; None for anything else (a dynamically linked ELF, a script, a file that cannot
/// be read: exec decides).
fn unreachable_by_preload(path: &std::path::Path) -> Option<&'static str> {
    let data = std::fs::read(path).ok()?;
    let elf = Elf::parse(&data)?;
    if elf.has_section(&data, b".note.go.buildid") || elf.has_section(&data, b".go.buildinfo") {
        return Some("is a Go program (Go makes its system calls itself, not through libc)");
    }
    if !elf.has_interp(&data) {
        return Some("is statically linked (no ELF interpreter, so nothing loads the shim)");
    }
    if elf.has_inline_io_uring_setup(&data) {
        return Some("makes io_uring system calls itself (liburing linked into the executable, so the shim cannot refuse io_uring)");
    }
    None
}

/// The parts of an ELF file's header the checks need (ELF32 or ELF64, either byte order).
#[derive(Clone, Copy)]
struct Elf {
    wide: bool,
    le: bool,
    /// e_machine: 62 x86-64, 183 AArch64.
    machine: u64,
    phoff: u64,
    phentsize: u64,
    phnum: u64,
    shoff: u64,
    shentsize: u64,
    shnum: u64,
    shstrndx: u64,
}

impl Elf {
    /// The header of `d`; None when it is not an ELF executable or shared object.
    fn parse(d: &[u8]) -> Option<Elf> {
        if d.get(..4)? != b"\x7fELF" {
            return None;
        }
        let wide = match d.get(4)? {
            1 => false,
            2 => true,
            _ => return None,
        };
        let le = match d.get(5)? {
            1 => true,
            2 => false,
            _ => return None,
        };
        let mut e = Elf {
            wide,
            le,
            machine: 0,
            phoff: 0,
            phentsize: 0,
            phnum: 0,
            shoff: 0,
            shentsize: 0,
            shnum: 0,
            shstrndx: 0,
        };
        // e_type: ET_EXEC (2) or ET_DYN (3, PIE or a shared object).
        if !matches!(e.half(d, 16)?, 2 | 3) {
            return None;
        }
        e.machine = e.half(d, 18)?;
        // e_phoff and e_shoff (words), then e_phentsize, e_phnum, e_shentsize, e_shnum and
        // e_shstrndx (halves, after e_flags and e_ehsize), at the class's offsets.
        let (phoff, shoff, halves) = if wide { (32, 40, 54) } else { (28, 32, 42) };
        e.phoff = e.word(d, phoff, wide)?;
        e.shoff = e.word(d, shoff, wide)?;
        e.phentsize = e.half(d, halves)?;
        e.phnum = e.half(d, halves + 2)?;
        e.shentsize = e.half(d, halves + 4)?;
        e.shnum = e.half(d, halves + 6)?;
        e.shstrndx = e.half(d, halves + 8)?;
        Some(e)
    }

    /// The `N`-byte unsigned field at `at` (N at most 8), in the file's byte order; None
    /// where it would end past `d`.
    fn uint<const N: usize>(&self, d: &[u8], at: u64) -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        let b = d.get(at..at.checked_add(N)?)?;
        let append = |v: u64, x: &u8| v << 8 | u64::from(*x);
        Some(if self.le {
            b.iter().rev().fold(0, append)
        } else {
            b.iter().fold(0, append)
        })
    }

    /// A 16-bit field at `at`.
    fn half(&self, d: &[u8], at: u64) -> Option<u64> {
        self.uint::<2>(d, at)
    }

    /// A 32-bit field at `at`.
    fn u32(&self, d: &[u8], at: u64) -> Option<u64> {
        self.uint::<4>(d, at)
    }

    /// An address or offset at `at`: 64 bits when `wide`, else 32.
    fn word(&self, d: &[u8], at: u64, wide: bool) -> Option<u64> {
        if wide {
            self.uint::<8>(d, at)
        } else {
            self.uint::<4>(d, at)
        }
    }

    /// True when a program header is PT_INTERP (3): the kernel runs the dynamic loader.
    fn has_interp(&self, d: &[u8]) -> bool {
        (0..self.phnum.min(4096)).any(|i| {
            let at = self.phoff.saturating_add(i.saturating_mul(self.phentsize));
            self.u32(d, at) == Some(3)
        })
    }

    /// The file bytes of each executable PT_LOAD segment (PF_X set), clipped to the file.
    fn code<'a>(&self, d: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (wide, phoff, phentsize) = (self.wide, self.phoff, self.phentsize);
        let e = *self;
        (0..self.phnum.min(4096)).filter_map(move |i| {
            let at = phoff.saturating_add(i.saturating_mul(phentsize));
            // p_flags, p_offset, p_filesz: (4, 8, 32) in ELF64, (24, 4, 16) in ELF32.
            let (flags_at, off_at, size_at) = if wide { (4, 8, 32) } else { (24, 4, 16) };
            if e.u32(d, at)? != 1 || e.u32(d, at + flags_at)? & 1 == 0 {
                return None;
            }
            let off = usize::try_from(e.word(d, at + off_at, wide)?).ok()?;
            let size = usize::try_from(e.word(d, at + size_at, wide)?).ok()?;
            d.get(off..off.checked_add(size)?.min(d.len()))
        })
    }

    /// True when executable code holds an `io_uring_setup` system call made inline: the number
    /// 425 put in the system-call register (x86-64 `mov $425,%eax`; AArch64 `mov w8|x8,#425`)
    /// and the system call instruction (`syscall`; `svc #0`) within the next 32 bytes, as
    /// liburing's own system calls compile. Other machines: false.
    fn has_inline_io_uring_setup(&self, d: &[u8]) -> bool {
        const WINDOW: usize = 32;
        match self.machine {
            62 => self.code(d).any(|c| {
                c.windows(5).enumerate().any(|(i, w)| {
                    w == [0xb8, 0xa9, 0x01, 0x00, 0x00]
                        && c[i + 5..(i + 5 + WINDOW).min(c.len())]
                            .windows(2)
                            .any(|s| s == [0x0f, 0x05])
                })
            }),
            183 if self.le => self.code(d).any(|c| {
                let word = |at: usize| {
                    c.get(at..at + 4)
                        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                };
                (0..c.len() / 4).any(|k| {
                    matches!(word(4 * k), Some(0x5280_3528 | 0xd280_3528))
                        && (1..=WINDOW / 4).any(|j| word(4 * (k + j)) == Some(0xd400_0001))
                })
            }),
            _ => false,
        }
    }

    /// True when a section is called `name`.
    fn has_section(&self, d: &[u8], name: &[u8]) -> bool {
        let sh = |i: u64| self.shoff.saturating_add(i.saturating_mul(self.shentsize));
        // sh_offset of the section-name table.
        let off_at = if self.wide { 24 } else { 16 };
        let Some(strtab) = self.word(d, sh(self.shstrndx) + off_at, self.wide) else {
            return false;
        };
        (0..self.shnum.min(65536)).any(|i| {
            let Some(n) = self.u32(d, sh(i)) else {
                return false;
            };
            let Some(at) = usize::try_from(strtab.saturating_add(n)).ok() else {
                return false;
            };
            d.get(at..)
                .is_some_and(|s| s.split(|&b| b == 0).next() == Some(name))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Elf;

    /// A little-endian ELF64 executable for `machine` with one PT_LOAD segment holding
    /// `code`, its p_flags `flags` (PF_X = 1, PF_R = 4).
    fn elf(machine: u16, flags: u32, code: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; 64 + 56];
        d[..4].copy_from_slice(b"\x7fELF");
        d[4] = 2; // ELFCLASS64
        d[5] = 1; // little-endian
        d[6] = 1; // EV_CURRENT
        d[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        d[18..20].copy_from_slice(&machine.to_le_bytes());
        d[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        d[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        d[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let ph = 64;
        d[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        d[ph + 4..ph + 8].copy_from_slice(&flags.to_le_bytes());
        d[ph + 8..ph + 16].copy_from_slice(&120u64.to_le_bytes()); // p_offset
        d[ph + 32..ph + 40].copy_from_slice(&(code.len() as u64).to_le_bytes()); // p_filesz
        d.extend_from_slice(code);
        d
    }

    #[test]
    fn header_fields_are_read_in_the_files_byte_order_and_width() {
        let mut d = elf(62, 5, &[]);
        let le = Elf::parse(&d).expect("a valid ELF header");
        let at = 120; // beyond the headers: eight bytes of our own
        d.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(le.half(&d, at), Some(0x0708));
        assert_eq!(le.u32(&d, at), Some(0x0506_0708));
        assert_eq!(le.word(&d, at, false), Some(0x0506_0708));
        assert_eq!(le.word(&d, at, true), Some(0x0102_0304_0506_0708));
        let be = Elf { le: false, ..le };
        assert_eq!(be.half(&d, at), Some(0x0807));
        assert_eq!(be.u32(&d, at), Some(0x0807_0605));
        assert_eq!(be.word(&d, at, true), Some(0x0807_0605_0403_0201));
        // A field that would end past the file, or an offset past usize, is None.
        assert_eq!(le.word(&d, at + 1, true), None);
        assert_eq!(le.u32(&d, u64::MAX), None);
        assert_eq!(le.half(&d, at + 7), None);
    }

    fn found(machine: u16, flags: u32, code: &[u8]) -> bool {
        let d = elf(machine, flags, code);
        Elf::parse(&d)
            .expect("a valid ELF header")
            .has_inline_io_uring_setup(&d)
    }

    /// x86-64: `mov $425,%eax` then `syscall` within 32 bytes, in an executable segment.
    #[test]
    fn inline_io_uring_setup_is_found_in_x86_64_code_only() {
        let mov = [0xb8, 0xa9, 0x01, 0x00, 0x00];
        let call = |gap: usize| [&[0x90; 4][..], &mov, &vec![0x90; gap], &[0x0f, 0x05]].concat();
        assert!(found(62, 5, &call(3)));
        assert!(found(62, 5, &call(30)));
        assert!(!found(62, 5, &call(40)), "the system call too far away");
        assert!(!found(62, 4, &call(3)), "a segment that is not executable");
        assert!(
            !found(62, 5, &[&[0x90; 4][..], &mov, &[0xc3]].concat()),
            "no system call"
        );
        let other = [0x90, 0xb8, 0xaa, 0x01, 0x00, 0x00, 0x0f, 0x05];
        assert!(!found(62, 5, &other), "another system call number");
        assert!(!found(183, 5, &call(3)), "x86 bytes in an AArch64 file");
    }

    /// AArch64: `mov w8|x8, #425` then `svc #0` within 8 instructions.
    #[test]
    fn inline_io_uring_setup_is_found_in_aarch64_code() {
        let code = |mov: u32, gap: usize| -> Vec<u8> {
            let nop = 0xd503_201fu32;
            let mut w = vec![nop, mov];
            w.extend(std::iter::repeat_n(nop, gap));
            w.push(0xd400_0001);
            w.iter().flat_map(|i| i.to_le_bytes()).collect()
        };
        assert!(found(183, 5, &code(0x5280_3528, 2)), "mov w8, #425");
        assert!(found(183, 5, &code(0xd280_3528, 0)), "mov x8, #425");
        assert!(!found(183, 5, &code(0xd280_3548, 0)), "mov x8, #426");
        assert!(!found(183, 5, &code(0xd280_3528, 8)), "svc too far away");
        assert!(!found(183, 4, &code(0xd280_3528, 0)), "not executable");
    }
}

//! Sorting `perf script` samples into the categories of the cost breakdown (see the module
//! doc of [`super`]): a kernel sample by the functions on its kernel call stack, a user-space
//! sample by its leaf frame (the library it is in and, in corestack's code, the crate of its
//! Rust symbol path; the user-space call chains carry no frame pointers, so callers are not
//! used).

use serde::Serialize;

/// Where one sample of the server's CPU time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The program's own code and the libraries it links (libc, libevent, ...).
    Application,
    /// corestack's protocol engine (`engine::`, `wire::`).
    Engine,
    /// corestack's NIC path (`nic::`: rings, kicks, the port drivers).
    Nic,
    /// The application interface: the client library (`corestack::`), the shared rings and
    /// doorbells (`appif::`), the daemon's side of them (`service::`).
    AppInterface,
    /// The LD_PRELOAD shim (`corestack_preload::`).
    Shim,
    /// Other code in corestack's library or daemon: the standard library and dependencies
    /// (`core::`, `alloc::`, `hashbrown::`, ...) called from any of the above.
    CorestackOther,
    /// Reading the clock in the vDSO (`__vdso_clock_gettime`), whoever called it.
    VdsoClock,
    /// The kernel sending: `tcp_sendmsg`, `packet_sendmsg`, `xsk_sendmsg`,
    /// `__xsk_generic_xmit` on the stack. It includes the peer's receive processing, which a
    /// veth runs on the sender's CPU (for Linux and corestack alike).
    KernelTx,
    /// The kernel receiving: `tcp_recvmsg`, packet and AF_XDP receive, `net_rx_action` and
    /// the NAPI/backlog receive path (softirqs).
    KernelRx,
    /// Waiting and waking: epoll, poll, select, eventfd reads and writes, futexes,
    /// sched_yield, sleeps, the scheduler, busy-poll loops that found nothing.
    Waits,
    /// The rest of the kernel: system call entry and exit, page faults, timers, ...
    OtherKernel,
}

impl Category {
    /// Every category, in the order of the table's columns.
    pub const ALL: [Category; 11] = [
        Category::Application,
        Category::Engine,
        Category::Nic,
        Category::AppInterface,
        Category::Shim,
        Category::CorestackOther,
        Category::VdsoClock,
        Category::KernelTx,
        Category::KernelRx,
        Category::Waits,
        Category::OtherKernel,
    ];

    /// Its position in [`Category::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its column header (short).
    pub fn header(self) -> &'static str {
        match self {
            Category::Application => "app",
            Category::Engine => "engine",
            Category::Nic => "NIC",
            Category::AppInterface => "appif",
            Category::Shim => "shim",
            Category::CorestackOther => "cs other",
            Category::VdsoClock => "vdso",
            Category::KernelTx => "k tx",
            Category::KernelRx => "k rx",
            Category::Waits => "k wait",
            Category::OtherKernel => "k other",
        }
    }

    /// Its name and what it holds, for the legend.
    pub fn means(self) -> &'static str {
        match self {
            Category::Application => {
                "application: the program's own code and its libraries (libc, libevent, ...; \
                 also libc's memcpy when corestack calls it: user call chains are not unwound)"
            }
            Category::Engine => "engine: corestack's protocol engine (engine::, wire::)",
            Category::Nic => "NIC path: corestack's rings, kicks and port drivers (nic::)",
            Category::AppInterface => {
                "app interface: the client library (corestack::), the shared rings and doorbells \
                 (appif::), the daemon's side (service::)"
            }
            Category::Shim => "shim: the LD_PRELOAD shim (corestack_preload::)",
            Category::CorestackOther => {
                "corestack other: std, core, alloc and dependencies inside corestack's library or \
                 daemon"
            }
            Category::VdsoClock => "vdso clock: clock_gettime in the vDSO, whoever calls it",
            Category::KernelTx => {
                "kernel tx: stacks with tcp_sendmsg, packet_sendmsg, xsk_sendmsg or \
                 __xsk_generic_xmit; includes the peer's receive, which a veth runs on the \
                 sender's CPU (both stacks alike)"
            }
            Category::KernelRx => {
                "kernel rx: tcp_recvmsg, packet/AF_XDP receive, net_rx_action and the NAPI or \
                 backlog receive path"
            }
            Category::Waits => {
                "waits and wake-ups: epoll_wait, poll, select, eventfd read/write, futex, \
                 sched_yield, sleeps, schedule, busy-poll loops that found nothing"
            }
            Category::OtherKernel => {
                "other kernel: the rest (system call entry/exit, page faults, timers, ...)"
            }
        }
    }
}

/// One frame of a sample's call chain, leaf first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The instruction address.
    pub ip: u64,
    /// The symbol perf resolved (`[unknown]` if none).
    pub sym: &'a str,
    /// The object it is in: a path, `[kernel.kallsyms]`, `[vdso]`, `[unknown]`.
    pub dso: &'a str,
}

/// One sample of `perf script -F comm,pid,ip,sym,dso` output with call chains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The thread's name.
    pub comm: &'a str,
    /// The process id.
    pub pid: u32,
    /// The call chain, leaf first.
    pub frames: Vec<Frame<'a>>,
}

/// The samples of `perf script -F comm,pid,ip,sym,dso` output of a `perf record -g` file: each
/// sample a header line `COMM PID` (the name may hold spaces), then one indented line per
/// frame, `IP SYM (DSO)`. Lines that fit neither are skipped.
pub fn samples(text: &str) -> Vec<Sample<'_>> {
    let mut out: Vec<Sample<'_>> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            let head = line.trim_end();
            let Some((comm, pid)) = head.rsplit_once(char::is_whitespace) else {
                continue;
            };
            let Ok(pid) = pid.parse() else { continue };
            out.push(Sample {
                comm: comm.trim_end(),
                pid,
                frames: Vec::new(),
            });
        } else if let (Some(s), Some(f)) = (out.last_mut(), frame(line.trim())) {
            s.frames.push(f);
        }
    }
    out
}

/// One frame line: `IP SYM (DSO)`.
fn frame(line: &str) -> Option<Frame<'_>> {
    let (ip, rest) = line.split_once(char::is_whitespace)?;
    let ip = u64::from_str_radix(ip, 16).ok()?;
    let rest = rest.trim().strip_suffix(')')?;
    let (sym, dso) = rest.rsplit_once(" (")?;
    Some(Frame {
        ip,
        sym: sym.trim(),
        dso,
    })
}

/// True for an address in the kernel's half of the address space (x86-64, arm64).
fn is_kernel(ip: u64) -> bool {
    ip >= 0xffff_8000_0000_0000
}

/// The category of a sample with call chain `frames` (leaf first): by its kernel stack when
/// the leaf is in the kernel, else by the leaf.
pub fn classify(frames: &[Frame<'_>]) -> Category {
    match frames.first() {
        None => Category::OtherKernel,
        Some(leaf) if is_kernel(leaf.ip) => kernel(
            frames
                .iter()
                .take_while(|f| is_kernel(f.ip))
                .map(|f| plain(f.sym)),
        ),
        Some(leaf) => user(leaf),
    }
}

/// A kernel symbol without the compiler's suffixes (`.isra.0`, `.constprop.0`, `.part.0`,
/// `.cold`).
fn plain(sym: &str) -> &str {
    sym.split_once('.').map_or(sym, |(name, _)| name)
}

/// Kernel functions that mark a sample as sending (checked first).
const TX: &[&str] = &[
    "tcp_sendmsg",
    "tcp_sendmsg_locked",
    "udp_sendmsg",
    "packet_sendmsg",
    "xsk_sendmsg",
    "__xsk_sendmsg",
    "__xsk_generic_xmit",
    "xsk_generic_xmit",
];

/// Kernel functions that mark a sample as receiving (checked second).
const RX: &[&str] = &[
    "tcp_recvmsg",
    "tcp_recvmsg_locked",
    "udp_recvmsg",
    "packet_recvmsg",
    "xsk_recvmsg",
    "__xsk_recvmsg",
    "net_rx_action",
    "__napi_poll",
    "process_backlog",
    "__netif_receive_skb",
    "__netif_receive_skb_core",
    "netif_receive_skb",
    "ip_rcv",
    "tcp_v4_rcv",
];

/// Kernel functions that mark a sample as waiting or waking (checked third); a trailing `*`
/// matches a prefix.
const WAITS: &[&str] = &[
    "do_epoll_wait",
    "ep_poll",
    "ep_busy_loop",
    "do_sys_poll",
    "do_select",
    "core_sys_select",
    "eventfd_read",
    "eventfd_write",
    "do_futex",
    "futex_*",
    "do_sched_yield",
    "hrtimer_nanosleep",
    "do_nanosleep",
    "schedule",
    "__schedule",
    "schedule_hrtimeout_range",
    "preempt_schedule_irq",
    "finish_task_switch",
    "try_to_wake_up",
    "napi_busy_loop",
    "__napi_busy_loop",
    "sk_busy_loop",
];

fn matches(sym: &str, list: &[&str]) -> bool {
    list.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => sym.starts_with(prefix),
        None => sym == *p,
    })
}

/// A kernel sample by the functions on its stack: tx, then rx, then waits, else other.
fn kernel<'a>(stack: impl Iterator<Item = &'a str> + Clone) -> Category {
    for (list, category) in [
        (TX, Category::KernelTx),
        (RX, Category::KernelRx),
        (WAITS, Category::Waits),
    ] {
        if stack.clone().any(|s| matches(s, list)) {
            return category;
        }
    }
    Category::OtherKernel
}

/// True for corestack's own objects: the shim (`libcorestack_preload.so`), the daemon (the
/// `corestack` binary), the C library (`libcorestack.so`).
fn is_corestack(dso: &str) -> bool {
    let name = dso.rsplit('/').next().unwrap_or(dso);
    matches!(
        name,
        "libcorestack_preload.so" | "corestack" | "libcorestack.so"
    )
}

/// A user-space sample by its leaf frame.
fn user(leaf: &Frame<'_>) -> Category {
    if leaf.dso == "[vdso]" || leaf.sym.starts_with("__vdso") {
        Category::VdsoClock
    } else if is_corestack(leaf.dso) {
        rust_crate(leaf.sym)
    } else {
        Category::Application
    }
}

/// The category of a corestack crate's name.
fn crate_category(name: &str) -> Option<Category> {
    match name {
        "engine" | "wire" => Some(Category::Engine),
        "nic" => Some(Category::Nic),
        "appif" | "corestack" | "service" => Some(Category::AppInterface),
        "corestack_preload" => Some(Category::Shim),
        _ => None,
    }
}

/// The category of a demangled Rust symbol in corestack's code: the first path segment (left
/// to right, `<impl ...>`, `<T as Trait>` and generic parameters included) that names a
/// corestack crate, so that `core::ptr::drop_in_place<engine::Tcb>` is the engine's; none:
/// [`Category::CorestackOther`].
pub fn rust_crate(sym: &str) -> Category {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut rest = sym;
    while let Some(at) = rest.find("::") {
        let before = &rest[..at];
        let start = before.rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
        if let Some(c) = crate_category(&before[start..]) {
            return c;
        }
        rest = &rest[at + 2..];
    }
    Category::CorestackOther
}

/// Sample counts by category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Samples per category, indexed by [`Category::index`].
    pub by: [u64; 11],
}

impl Counts {
    /// Classifies every sample of `perf script` output `text` (see [`samples`]) of the
    /// processes `pids` (every process's when empty).
    pub fn of(text: &str, pids: &[u32]) -> Counts {
        let mut c = Counts::default();
        for s in samples(text) {
            if pids.is_empty() || pids.contains(&s.pid) {
                c.by[classify(&s.frames).index()] += 1;
            }
        }
        c
    }

    /// All samples.
    pub fn total(&self) -> u64 {
        self.by.iter().sum()
    }

    /// The samples of `category`.
    pub fn get(&self, category: Category) -> u64 {
        self.by[category.index()]
    }
}

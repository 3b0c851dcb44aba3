//! Moving a forking program to service mode by itself (`corestack exec`
//! without `--socket`).
//!
//! In embedded and inline mode the engine is a thread of the program's
//! process, and a forked child has none: the sockets it inherited are dead
//! (ENETDOWN, see `stack`). Servers fork with their sockets open all the
//! time (a pre-forking or daemonizing master binds, then forks its
//! workers; a fork-per-connection server accepts, then forks), and under
//! the embedded engine they would be up and silent. Service mode serves
//! them (the daemon's engine outlives every process and shares listeners
//! and connections across forks), so a program that `corestack exec`
//! started in embedded or inline mode is moved there when it needs it:
//!
//! - **When.** (1) At a `fork` (not `vfork`, whose child only execs) of the
//!   process that runs the engine while it holds a corestack listener and
//!   has accepted no connection yet: a pre-forking or daemonizing server
//!   that forks its workers. The move happens instead of that fork, so
//!   nothing is lost. (2) In a forked child whose parent held a corestack
//!   listener when it forked, at the first call on a socket it inherited
//!   (which would say ENETDOWN): a fork-per-connection server. The child
//!   tells the engine's process through a datagram socket pair the shim
//!   holds for it (a reserved fd the program cannot close) and ends
//!   (`_exit(0)`); a thread of the engine's process waiting on that pair
//!   makes the move. A child that never uses what it inherited (a redis
//!   `BGSAVE`, a helper that execs) moves nothing.
//! - **How.** The process starts a private daemon, `corestack run
//!   --private-for PID` with the interface, addresses, gateways, driver,
//!   engines and CPUs of its own stack and a control socket in a private
//!   directory (`/tmp/corestack-exec-PID-*`, mode 0711; the daemon's
//!   warnings and errors go to `daemon.log` there, not to the program's
//!   stderr, which the daemon must not hold open). It resets its
//!   connections (RST: their peers learn at once), marks every fd it did
//!   not start with close-on-exec, puts back the signal dispositions and
//!   mask and the working directory it started with, and execs itself again
//!   in place: the same pid, the executable, arguments and environment it
//!   started with, plus `CORESTACK_SOCKET` (the private daemon) and
//!   `CORESTACK_PRIVATE_DAEMON=1` (the first join waits up to 10 s for the
//!   daemon, which takes the interface once the exec has closed the
//!   engine's sockets). The daemon stops when the program and every
//!   process of it that the daemon has seen are gone.
//! - **What it costs.** The program runs from the start a second time: what
//!   it did before the move is done again (its output before it says it
//!   again, files it created or truncated are so again, input it read from
//!   a pipe is gone, a pid file is written again), and the connections it
//!   had (a fork-per-connection server's first ones, those in its accept
//!   queue) are reset.
//! - **Where it cannot.** A program not started by `corestack exec` (the
//!   variables set by hand: no `CORESTACK_EXEC_BIN`) keeps the old
//!   behaviour, and a child that uses an inherited socket says once on
//!   stderr what to do. A move that fails (the daemon cannot be started,
//!   the exec fails) ends the program with one line saying what to do and
//!   exit status 1.
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};
use std::ffi::{CString, OsString};
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// What the program started with, to start it again.
struct Origin {
    exe: PathBuf,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    /// The fds open at start (the rest are closed by the exec).
    fds: Vec<i32>,
    signals: crate::sys::SignalState,
    /// The `corestack` executable (`CORESTACK_EXEC_BIN`).
    bin: PathBuf,
}

static ORIGIN: OnceLock<Option<Origin>> = OnceLock::new();
/// The children's end of the pair: a forked child sends one byte on it
/// to ask the engine's process to move.
static CHILD_END: OnceLock<OwnedFd> = OnceLock::new();
/// Set in the engine's process just before each fork: it held a corestack
/// listener then (so a child that uses what it inherited is a server's).
static SERVER_AT_FORK: AtomicBool = AtomicBool::new(false);
/// A move is under way (the fork that may spawn the daemon must not start
/// another).
static MOVING: AtomicBool = AtomicBool::new(false);
static SAID: AtomicBool = AtomicBool::new(false);

/// The environment variable `corestack exec` sets to its own executable
/// (embedded and inline mode): without it the shim never moves a program.
pub const EXEC_BIN: &str = "CORESTACK_EXEC_BIN";
/// Called by the library's constructor in embedded and inline mode:
/// records what the program started with, when `corestack exec` started it.
pub fn init(cfg: &corestack::StackConfig) {
    ORIGIN.get_or_init(|| {
        if cfg.service.is_some() {
            return None;
        }
        let bin = std::env::var_os(EXEC_BIN).filter(|b| !b.is_empty())?;
        let _inside = crate::sys::Inside::enter();
        let exe = std::fs::read_link("/proc/self/exe").ok()?;
        let cmdline = std::fs::read("/proc/self/cmdline").ok()?;
        // NUL-terminated arguments (an empty one stays an argument).
        let argv = cmdline
            .strip_suffix(&[0])
            .unwrap_or(&cmdline)
            .split(|&b| b == 0)
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect();
        Some(Origin {
            exe,
            argv,
            env: std::env::vars_os().collect(),
            cwd: std::env::current_dir().ok(),
            fds: open_fds(),
            signals: crate::sys::signal_state(),
            bin: bin.into(),
        })
    });
}

fn origin() -> Option<&'static Origin> {
    ORIGIN.get()?.as_ref()
}

/// The fds open now (from /proc/self/fd, less the directory's own fd,
/// closed by the time each one is checked).
fn open_fds() -> Vec<i32> {
    let listed: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    listed
        .into_iter()
        .filter(|&fd| crate::sys::k::fcntl_int(fd, libc::F_GETFD, 0).is_ok())
        .collect()
}

/// The embedded or inline stack just started: a thread waits for a forked
/// child's request to move (see the module's notes), on a socket pair
/// whose other end the children inherit.
pub fn stack_started() {
    if origin().is_none() {
        return;
    }
    let Ok((mine, theirs)) = crate::table::internal_dgram_pair() else {
        return;
    };
    let mine = UnixDatagram::from(mine);
    let spawned = std::thread::Builder::new()
        .name("corestack-fork".into())
        .spawn(move || {
            let _inside = crate::sys::Inside::enter();
            let mut b = [0u8; 1];
            loop {
                match mine.recv(&mut b) {
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
            drop(_inside);
            move_now("a child it forked uses a corestack socket it inherited");
        });
    if spawned.is_ok() {
        let _ = CHILD_END.set(theirs);
    }
}

/// Just before the real fork (not vfork) in any process: in the engine's
/// process, records whether it holds a listener, and moves a server that
/// forks before its first accept (this does not return then).
pub fn before_fork() {
    if origin().is_none() || crate::stack::forked() || MOVING.load(Ordering::Acquire) {
        return;
    }
    if crate::stack::started().is_none() {
        return;
    }
    let listens = crate::sock::holds_listener();
    SERVER_AT_FORK.store(listens, Ordering::Relaxed);
    if listens && crate::sock::accepted() == 0 {
        move_now("it forks with a corestack listener open");
    }
}

/// In a forked child (embedded or inline mode), a call on an inherited
/// corestack socket is about to say ENETDOWN: a server's child asks the
/// engine's process to move and ends; otherwise one line on stderr says
/// what to do (once).
pub fn dead_in_child() {
    let Some(cfg) = crate::stack::config() else {
        return;
    };
    if cfg.service.is_some() || !crate::stack::forked() {
        return;
    }
    let end = CHILD_END.get();
    if let Some(end) = end.filter(|_| origin().is_some() && SERVER_AT_FORK.load(Ordering::Relaxed))
    {
        let _inside = crate::sys::Inside::enter();
        if let Ok(mine) = end.try_clone() {
            if UnixDatagram::from(mine).send(&[1]).is_ok() {
                crate::sys::exit_now(0);
            }
        }
    }
    crate::sys::log_once(
        &SAID,
        &refusal(cfg, "its forked child uses a corestack socket it inherited"),
    );
}

/// The one line that says what to do when the program cannot be moved.
fn refusal(cfg: &corestack::StackConfig, what: &str) -> String {
    let prog = std::env::args_os()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| "the program".into());
    format!(
        "{prog} ({what}) cannot be served in {} mode: run it in service mode: corestack run --iface {} --ip {}/{} --socket PATH, then corestack exec --socket PATH -- {prog}",
        if cfg.inline { "inline" } else { "embedded" },
        cfg.iface,
        cfg.ip,
        cfg.prefix
    )
}

/// Moves the program to service mode (see the module's notes); never
/// returns: on failure it ends the process with one line and status 1.
fn move_now(why: &str) -> ! {
    if MOVING.swap(true, Ordering::AcqRel) {
        // Another thread moves the program: its exec ends this one.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let (Some(cfg), Some(o)) = (crate::stack::config(), origin()) else {
        crate::sys::exit_now(1);
    };
    match try_move(cfg, o, why) {
        Ok(never) => match never {},
        Err(e) => {
            crate::sys::log_line(&format!(
                "{}; moving it to service mode failed: {e}",
                refusal(cfg, why)
            ));
            crate::sys::exit_now(1);
        }
    }
}

fn try_move(
    cfg: &corestack::StackConfig,
    o: &Origin,
    why: &str,
) -> Result<std::convert::Infallible, String> {
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = PathBuf::from(format!("/tmp/corestack-exec-{pid}-{nanos:08x}"));
    let socket = dir.join("ctl.sock");
    {
        let _inside = crate::sys::Inside::enter();
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o711)
            .create(&dir)
            .map_err(|e| format!("creating {}: {e}", dir.display()))?;
        // The daemon takes the interface when this end closes: at the exec.
        let (release_rd, release_wr) =
            UnixStream::pair().map_err(|e| format!("a socket pair: {e}"))?;
        // Every fd but stdio is close-on-exec from here: the program's others must not
        // reach the daemon (a listener's kernel socket would keep its port), and the exec
        // below closes all but those the program started with.
        let changed: Vec<i32> = open_fds()
            .into_iter()
            .filter(|&fd| fd > 2 && crate::sys::set_cloexec(fd, true))
            .collect();
        let spawned = spawn_daemon(cfg, o, pid, &socket, release_rd);
        for &fd in changed.iter().filter(|fd| o.fds.contains(fd)) {
            crate::sys::set_cloexec(fd, false);
        }
        if spawned.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        spawned?;
        let _ = release_wr.into_raw_fd(); // close-on-exec: closed by the exec
    }
    crate::sys::log_line(&format!(
        "{} ({why}): moved to service mode, a private daemon at {}; the program starts again (pid {pid})",
        o.argv
            .first()
            .map_or_else(|| o.exe.display().to_string(), |a| a.to_string_lossy().into_owned()),
        socket.display()
    ));
    // Their peers see a reset now rather than silence.
    crate::sock::reset_all();
    crate::stack::settle(crate::stack::SETTLE);
    let _inside = crate::sys::Inside::enter();
    for fd in open_fds() {
        if !o.fds.contains(&fd) {
            crate::sys::set_cloexec(fd, true);
        }
    }
    if let Some(cwd) = &o.cwd {
        let _ = std::env::set_current_dir(cwd);
    }
    let cstr =
        |b: &[u8]| CString::new(b.to_vec()).map_err(|_| "a NUL in the arguments".to_string());
    let path = cstr(o.exe.as_os_str().as_bytes())?;
    let argv = o
        .argv
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let drop_vars = [
        "CORESTACK_IFACE",
        "CORESTACK_IP",
        "CORESTACK_IP6",
        "CORESTACK_GATEWAY",
        "CORESTACK_GATEWAY6",
        "CORESTACK_DRIVER",
        "CORESTACK_INLINE",
        "CORESTACK_CORES",
        "CORESTACK_SOCKET",
        EXEC_BIN,
        crate::stack::PRIVATE,
    ];
    let mut env = Vec::with_capacity(o.env.len() + 2);
    for (k, v) in &o.env {
        if drop_vars.iter().any(|d| k.as_bytes() == d.as_bytes()) {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        env.push(cstr(&kv)?);
    }
    let mut sock_var = b"CORESTACK_SOCKET=".to_vec();
    sock_var.extend_from_slice(socket.as_os_str().as_bytes());
    env.push(cstr(&sock_var)?);
    env.push(cstr(format!("{}=1", crate::stack::PRIVATE).as_bytes())?);
    crate::sys::restore_signals(&o.signals);
    let e = crate::sys::exec_image(&path, &argv, &env);
    Err(format!(
        "exec {}: {}",
        o.exe.display(),
        std::io::Error::from_raw_os_error(e)
    ))
}

/// Starts `corestack run --private-for PID` on this stack's interface with
/// its control socket at `socket`; `release` becomes its stdin (EOF: the
/// engine's sockets are closed). Waits for the launcher, which detaches
/// the daemon and exits at once.
fn spawn_daemon(
    cfg: &corestack::StackConfig,
    o: &Origin,
    pid: u32,
    socket: &std::path::Path,
    release: UnixStream,
) -> Result<(), String> {
    // Not the program's stderr: the daemon would hold it open after the program (and
    // whoever reads it would wait for the daemon).
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(crate::stack::log_path(socket))
        .map_err(|e| format!("creating the daemon's log: {e}"))?;
    let mut cmd = std::process::Command::new(&o.bin);
    cmd.arg("run")
        .arg("--private-for")
        .arg(pid.to_string())
        .arg("--socket")
        .arg(socket)
        .arg("--iface")
        .arg(&cfg.iface)
        .arg("--ip")
        .arg(format!("{}/{}", cfg.ip, cfg.prefix))
        .arg("--driver")
        .arg(cfg.driver.name())
        .arg("--cores")
        .arg(cfg.engines.to_string());
    if let Some((a, p)) = cfg.ip6 {
        cmd.arg("--ip").arg(format!("{a}/{p}"));
    }
    if let Some(g) = cfg.gateway {
        cmd.arg("--gateway").arg(g.to_string());
    }
    if let Some(g) = cfg.gateway6 {
        cmd.arg("--gateway").arg(g.to_string());
    }
    if let Some(cpus) = std::env::var_os("CORESTACK_ENGINE_CPUS").filter(|c| !c.is_empty()) {
        cmd.arg("--cpus").arg(cpus);
    }
    cmd.env_remove("LD_PRELOAD")
        .env_remove("CORESTACK_SOCKET")
        .env_remove(EXEC_BIN)
        .stdin(std::process::Stdio::from(OwnedFd::from(release)))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(log));
    let status = cmd
        .status()
        .map_err(|e| format!("starting {}: {e}", o.bin.display()))?;
    if !status.success() {
        return Err(format!("{} run --private-for: {status}", o.bin.display()));
    }
    Ok(())
}

//! What the `corestack` commands share, product and benchmark alike: the corestack options
//! (`--iface --ip --driver --mode ...`) and starting a stack from them, the stop flag
//! (SIGINT/SIGTERM), errors printed as one line, and small socket traits implemented by both the
//! kernel's `std::net` sockets and corestack's, so one echo loop, one ping-pong client and one
//! netcat drive either stack.
//!
//! ```text
//!  opts     StackOpts (kernel or corestack, and how), Cidr, starting the stack
//!  wait     Waiter: how a loop waits when a nonblocking pass found nothing to do
//!  sockets  Stream, Listener, Datagram over either stack; a kernel socket's congestion control
//!  stop     the stop flag, Interrupted (exit status 130)
//!  errors   one_line, bind and connect errors explained
//!  sink     the sink protocol of `bench stream` and `serve sink`
//! ```
//!
//! The product's commands (`run`, `serve`, `nc`, `impair`, `exec`) and crate `bench` depend on
//! this crate; it depends on neither.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod errors;
pub mod opts;
pub mod sink;
pub mod sockets;
pub mod stop;
pub mod wait;

pub use errors::{bind_error, connect_error, exit_on_error, one_line};
pub use opts::{
    core_cc_arg, cpu_list, kernel_listen_addr, Cidr, CpuList, IpCidr, ModeArg, StackOpts, TxArg,
};
pub use sockets::{set_kernel_cc, Datagram, Listener, Stream};
pub use stop::{stop_flag, Interrupted};
pub use wait::Waiter;

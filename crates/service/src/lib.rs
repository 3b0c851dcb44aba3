//! The corestack daemon as a library (service mode): what `corestack run`
//! does around the engine, testable without root over the `mem` port.
//!
//! Applications connect to the daemon's control socket, say hello, and get
//! a segment of shared memory and a doorbell (`appif::ctl`, `appif::seg`);
//! from then on they talk to the engine only through the segment: command
//! descriptors in its command ring, bytes in per-socket rings. The daemon
//! checks everything it reads there, and an application that breaks the
//! protocol loses its own association while the others carry on.
//!
//! ```text
//!  config     TOML + command-line overrides → Validated      (ConfigError)
//!             → corestack::StackConfig, the engines' settings
//!  control    the control socket applications connect to     (ControlError)
//!  assoc      one association per application: segment,     (JoinError)
//!             command ring, doorbell, credentials, counters
//!  translate  Desc → Command, port permissions               (ProtocolViolation)
//!  forks      sockets shared across fork: references per socket,
//!             held for children until they take over or end
//!  host       the loop: command rings → engine, control work,
//!             violations, idle sleep, stop                   (SetupError)
//!  engines    several engines (`cores = N`): a host per engine
//!             on its own thread, associations told to each
//!  mailbox    what the hosts of several engines post each other
//!  daemon     opens the AF_XDP or TAP port(s), runs the host(s) (RunError)
//!  apps       the application table for `corestack stat`
//! ```
//!
//! Threading: one thread per engine runs its [`Host`] and owns that engine
//! (one in all with `cores = 1`); the applications run in other processes
//! (or threads) and meet them only in shared memory and on the control
//! socket.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod apps;
pub mod assoc;
pub mod config;
pub mod control;
pub mod daemon;
mod engines;
mod forks;
pub mod host;
mod mailbox;
pub mod translate;

pub use assoc::JoinError;
pub use config::{Config, ConfigError, Overrides, Validated};
pub use control::{ControlError, ControlSocket};
pub use daemon::{run, RunError};
pub use engines::serve;
pub use host::{Host, SetupError};
pub use translate::{translate, AppStats, ProtocolViolation};

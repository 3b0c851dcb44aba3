//! How a loop waits when a nonblocking pass over its sockets found nothing to do, on either
//! stack.

use std::io;
use std::time::Duration;

use corestack::Stack;

/// How a loop waits when a nonblocking pass found nothing to do.
#[derive(Clone)]
pub enum Waiter {
    /// The kernel stack: spin (a CPU hint) or sleep briefly.
    Kernel,
    /// corestack: `Stack::poll`, which in inline mode runs the engine.
    Core {
        /// The stack to poll.
        stack: Stack,
        /// Inline mode (the app thread runs the engine); else embedded.
        inline: bool,
    },
}

impl Waiter {
    /// Spin once: no sleeping. For corestack this runs engine iterations (inline) without
    /// waiting.
    pub fn spin(&self) -> io::Result<()> {
        match self {
            Waiter::Kernel => {
                std::hint::spin_loop();
                Ok(())
            }
            Waiter::Core { stack, inline } => {
                stack.poll(Some(Duration::ZERO));
                if !inline {
                    // The engine thread may share this CPU: let it run.
                    std::thread::yield_now();
                }
                Ok(())
            }
        }
    }

    /// Wait up to `timeout` for something to happen (corestack: any socket event; kernel: a
    /// short sleep, at most `timeout`).
    pub fn wait(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Waiter::Kernel => {
                std::thread::sleep(timeout.min(Duration::from_micros(200)));
                Ok(())
            }
            Waiter::Core { stack, .. } => {
                stack.poll(Some(timeout));
                Ok(())
            }
        }
    }
}

//! The file's reader into the stack configuration every corestack
//! program shares: a [`Validated`] file says what a stack needs to start as
//! a [`StackConfig`], and the daemon's engines take their settings from it
//! ([`StackConfig::engine_config`]) plus the daemon's own limits.

use corestack::{EngineConfig, StackConfig};

use super::{Policy, Validated};

impl Validated {
    /// What this file (with the command line's overrides) says a stack
    /// needs to start, in the type the environment's and the flags' readers
    /// also produce: the interface, driver, addresses, engines and their
    /// CPUs, polling, ring sizes and congestion control. The daemon's own
    /// settings (socket, per-application limits, ports) are not in it.
    pub fn stack_config(&self) -> StackConfig {
        let (poll, idle_us) = match self.policy {
            Policy::Busy => (corestack::PollPolicy::Busy, corestack::IDLE_US_DEFAULT),
            Policy::Interrupt => (corestack::PollPolicy::Interrupt, corestack::IDLE_US_DEFAULT),
            Policy::Adaptive { idle } => (
                corestack::PollPolicy::Adaptive,
                u64::try_from(idle.as_micros()).unwrap_or(u64::MAX),
            ),
        };
        StackConfig {
            iface: self.iface.clone(),
            driver: self.driver,
            ip: self.ip,
            prefix: self.prefix,
            gateway: self.gateway,
            ip6: self.ip6,
            gateway6: self.gateway6,
            engines: self.cores as usize,
            engine_cpus: self.cpus.clone(),
            poll,
            idle_us,
            ring_bytes: Some(self.ring_bytes as usize),
            ring_max_bytes: Some(self.ring_max_bytes as usize),
            congestion: Some(self.congestion),
            ..StackConfig::default()
        }
    }

    /// The engine's settings for this configuration: the stack's
    /// ([`Validated::stack_config`], [`StackConfig::engine_config`]: the
    /// addresses, IPv6 with the link-local address from the port's MAC,
    /// the ring sizes, the congestion control, DCTCP turning ECN on), the
    /// growth limit per application, and room for every application to
    /// fill its own segment without starving the others (`max_apps` ×
    /// `max_sockets_per_app` sockets, clamped to 4096..=262144).
    pub fn engine_config(&self) -> EngineConfig {
        let mut stack = self.stack_config();
        stack.max_sockets =
            Some((self.max_apps as usize * self.max_sockets_per_app as usize).clamp(4096, 1 << 18));
        EngineConfig {
            buffer_growth_limit: usize::try_from(self.buffer_growth_limit).unwrap_or(usize::MAX),
            ..stack.engine_config()
        }
    }
}

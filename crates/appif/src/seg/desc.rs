//! The command ring of an application segment: the application's
//! [`Desc`] descriptors (64 bytes each, checked by the engine before use),
//! and the two ends of the ring.

use super::layout::{CMD_HEAD, CMD_TAIL};
use super::{AppSegment, DESC_BYTES};
use crate::cc::CcKind;
use core::net::{Ipv4Addr, SocketAddrV4};
use core::sync::atomic::Ordering;

/// A command descriptor: what the application asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desc {
    /// Open a TCP connection from `slot` to `remote` (local port 0 = ephemeral).
    Connect {
        /// The application's socket slot in its segment.
        slot: u32,
        /// The peer's address and port.
        remote: SocketAddrV4,
        /// Local port; 0 picks an ephemeral one.
        local_port: u16,
        /// TCP_NODELAY from the start.
        nodelay: bool,
    },
    /// Listen on `local` with at most `backlog` connections not yet accepted.
    Listen {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Local address (0.0.0.0 or the stack's) and port.
        local: SocketAddrV4,
        /// Connections accepted but not yet taken by the application, at most.
        backlog: u32,
    },
    /// Bind a UDP socket to `local`.
    UdpBind {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Local address (0.0.0.0 or the stack's) and port.
        local: SocketAddrV4,
    },
    /// New bytes wait in the slot's TX ring.
    Send {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// The application consumed RX bytes.
    Recvd {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// shutdown(SHUT_WR).
    Shutdown {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// The application is done with the slot.
    Close {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// TCP_NODELAY.
    SetNodelay {
        /// The application's socket slot in its segment.
        slot: u32,
        /// True: Nagle off.
        on: bool,
    },
    /// SO_KEEPALIVE.
    SetKeepalive {
        /// The application's socket slot in its segment.
        slot: u32,
        /// True: probe an idle connection.
        on: bool,
    },
    /// TCP_CONGESTION, carried as [`CcKind::wire`]'s byte.
    SetCongestion {
        /// The application's socket slot in its segment.
        slot: u32,
        /// The algorithm from now on.
        cc: CcKind,
    },
    /// SO_RCVBUF / SO_SNDBUF in bytes (0: leave as is).
    SetBuffers {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Receive buffer, bytes (0: as it is).
        rcv: u32,
        /// Send buffer, bytes (0: as it is).
        snd: u32,
    },
    /// A forked child joins the listener it inherited: `slot` becomes one
    /// more member of the listening socket in `parent_slot` of its parent's
    /// association (the one its hello named), sharing its port; new
    /// connections go to the members that accept.
    JoinListener {
        /// The child's socket slot in its own segment.
        slot: u32,
        /// The listener's slot in the parent's segment.
        parent_slot: u32,
        /// Connections accepted but not yet taken by this member, at most.
        backlog: u32,
    },
    /// Close with a reset (SO_LINGER {1, 0}): RST to the peer, unsent
    /// bytes dropped (RFC 9293 §3.10.5); the slot is let go as by Close.
    Abort {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT (RFC 1122 §4.2.3.6).
    SetKeepaliveParams {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Idle time before the first probe, seconds.
        idle_s: u32,
        /// Time between unanswered probes, seconds.
        interval_s: u32,
        /// Unanswered probes before the connection times out.
        count: u32,
    },
}

/// Why a descriptor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescError {
    /// The opcode is not one of [`Desc`]'s.
    BadOpcode(u8),
    /// A boolean field holds something other than 0 or 1.
    BadFlag,
    /// A congestion-control byte that names no [`CcKind`].
    BadCc(u8),
}

impl Desc {
    /// The slot the descriptor names.
    pub fn slot(&self) -> u32 {
        match *self {
            Desc::Connect { slot, .. }
            | Desc::Listen { slot, .. }
            | Desc::UdpBind { slot, .. }
            | Desc::Send { slot }
            | Desc::Recvd { slot }
            | Desc::Shutdown { slot }
            | Desc::Close { slot }
            | Desc::SetNodelay { slot, .. }
            | Desc::SetKeepalive { slot, .. }
            | Desc::SetCongestion { slot, .. }
            | Desc::SetBuffers { slot, .. }
            | Desc::JoinListener { slot, .. }
            | Desc::Abort { slot }
            | Desc::SetKeepaliveParams { slot, .. } => slot,
        }
    }

    /// Encodes as 64 bytes: opcode (1), flag (1), port (2, BE), slot (4, LE),
    /// IPv4 address (4), argument (4, LE), second argument (4, LE), third
    /// argument (4, LE), zeros.
    pub fn encode(&self) -> [u8; DESC_BYTES] {
        let mut b = [0u8; DESC_BYTES];
        let (op, flag, addr, arg) = match *self {
            Desc::Connect {
                remote,
                local_port,
                nodelay,
                ..
            } => (1, nodelay as u8, Some(remote), u32::from(local_port)),
            Desc::Listen { local, backlog, .. } => (2, 0, Some(local), backlog),
            Desc::UdpBind { local, .. } => (3, 0, Some(local), 0),
            Desc::Send { .. } => (4, 0, None, 0),
            Desc::Recvd { .. } => (5, 0, None, 0),
            Desc::Shutdown { .. } => (6, 0, None, 0),
            Desc::Close { .. } => (7, 0, None, 0),
            Desc::SetNodelay { on, .. } => (8, on as u8, None, 0),
            Desc::SetKeepalive { on, .. } => (9, on as u8, None, 0),
            Desc::SetCongestion { cc, .. } => (10, cc.wire(), None, 0),
            Desc::SetBuffers { rcv, snd, .. } => {
                b[16..20].copy_from_slice(&snd.to_le_bytes());
                (11, 0, None, rcv)
            }
            Desc::JoinListener {
                parent_slot,
                backlog,
                ..
            } => {
                b[16..20].copy_from_slice(&parent_slot.to_le_bytes());
                (12, 0, None, backlog)
            }
            Desc::Abort { .. } => (13, 0, None, 0),
            Desc::SetKeepaliveParams {
                idle_s,
                interval_s,
                count,
                ..
            } => {
                b[16..20].copy_from_slice(&interval_s.to_le_bytes());
                b[20..24].copy_from_slice(&count.to_le_bytes());
                (14, 0, None, idle_s)
            }
        };
        b[0] = op;
        b[1] = flag;
        if let Some(a) = addr {
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[8..12].copy_from_slice(&a.ip().octets());
        }
        b[4..8].copy_from_slice(&self.slot().to_le_bytes());
        b[12..16].copy_from_slice(&arg.to_le_bytes());
        b
    }

    /// Decodes 64 bytes written by an application (anything at all).
    pub fn decode(b: &[u8; DESC_BYTES]) -> Result<Desc, DescError> {
        let slot = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let addr = SocketAddrV4::new(
            Ipv4Addr::new(b[8], b[9], b[10], b[11]),
            u16::from_be_bytes([b[2], b[3]]),
        );
        let arg = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        let arg2 = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
        let arg3 = u32::from_le_bytes([b[20], b[21], b[22], b[23]]);
        let flag = || match b[1] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DescError::BadFlag),
        };
        Ok(match b[0] {
            1 => Desc::Connect {
                slot,
                remote: addr,
                local_port: arg as u16,
                nodelay: flag()?,
            },
            2 => Desc::Listen {
                slot,
                local: addr,
                backlog: arg,
            },
            3 => Desc::UdpBind { slot, local: addr },
            4 => Desc::Send { slot },
            5 => Desc::Recvd { slot },
            6 => Desc::Shutdown { slot },
            7 => Desc::Close { slot },
            8 => Desc::SetNodelay { slot, on: flag()? },
            9 => Desc::SetKeepalive { slot, on: flag()? },
            10 => Desc::SetCongestion {
                slot,
                cc: CcKind::from_wire(b[1]).ok_or(DescError::BadCc(b[1]))?,
            },
            11 => Desc::SetBuffers {
                slot,
                rcv: arg,
                snd: arg2,
            },
            12 => Desc::JoinListener {
                slot,
                parent_slot: arg2,
                backlog: arg,
            },
            13 => Desc::Abort { slot },
            14 => Desc::SetKeepaliveParams {
                slot,
                idle_s: arg,
                interval_s: arg2,
                count: arg3,
            },
            op => return Err(DescError::BadOpcode(op)),
        })
    }
}

/// Application: the producing end of the command ring.
pub struct CmdProducer {
    seg: AppSegment,
    head: u64,
}

impl CmdProducer {
    /// The producer of `seg`'s command ring, continuing from its head.
    pub fn new(seg: AppSegment) -> CmdProducer {
        let head = seg.word64(CMD_HEAD).load(Ordering::Acquire);
        CmdProducer { seg, head }
    }

    /// Enqueues `d`; false when the ring is full.
    pub fn push(&mut self, d: &Desc) -> bool {
        let tail = self.seg.word64(CMD_TAIL).load(Ordering::Acquire);
        if self.head.wrapping_sub(tail) >= u64::from(self.seg.layout.cmd_slots) {
            return false;
        }
        let bytes = d.encode();
        // The descriptor at head is outside [tail, head): only this producer
        // writes it until the release store below publishes it.
        for (w, c) in self.seg.cmd_at(self.head).iter().zip(bytes.chunks_exact(8)) {
            w.store(
                u64::from_ne_bytes(c.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        self.head = self.head.wrapping_add(1);
        self.seg
            .word64(CMD_HEAD)
            .store(self.head, Ordering::Release);
        true
    }

    /// After pushing: true when the engine is asleep and must be woken
    /// (its flag is cleared here, so one doorbell per sleep).
    pub fn engine_needs_doorbell(&self) -> bool {
        let f = self.seg.engine_sleeping();
        f.load(Ordering::SeqCst) != 0 && f.swap(0, Ordering::SeqCst) != 0
    }
}

/// What the engine found in an application's command ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdError {
    /// The application moved the head backwards or more than a ring ahead.
    BadIndex {
        /// The head the application wrote.
        head: u64,
        /// The engine's tail when it read it.
        tail: u64,
    },
    /// A descriptor that does not decode.
    BadDesc(DescError),
}

/// Engine: the consuming end of an application's command ring.
pub struct CmdConsumer {
    seg: AppSegment,
    tail: u64,
    head_seen: u64,
}

impl CmdConsumer {
    /// The consumer of `seg`'s command ring (fresh from [`AppSegment::init`]).
    pub fn new(seg: AppSegment) -> CmdConsumer {
        CmdConsumer {
            seg,
            tail: 0,
            head_seen: 0,
        }
    }

    /// Descriptors waiting, after checking the application's head index.
    pub fn pending(&mut self) -> Result<u64, CmdError> {
        let head = self.seg.word64(CMD_HEAD).load(Ordering::Acquire);
        let cap = u64::from(self.seg.layout.cmd_slots);
        if head.wrapping_sub(self.head_seen)
            > self.tail.wrapping_add(cap).wrapping_sub(self.head_seen)
        {
            return Err(CmdError::BadIndex {
                head,
                tail: self.tail,
            });
        }
        self.head_seen = head;
        Ok(head.wrapping_sub(self.tail))
    }

    /// Takes the next descriptor (copied out before it is decoded), if any.
    pub fn pop(&mut self) -> Option<Result<Desc, CmdError>> {
        match self.pending() {
            Err(e) => return Some(Err(e)),
            Ok(0) => return None,
            Ok(_) => {}
        }
        let mut b = [0u8; DESC_BYTES];
        // The descriptor at tail is inside [tail, head) as checked above,
        // published by the producer's release store; it is copied out before
        // it is looked at (copy-then-check).
        for (w, c) in self.seg.cmd_at(self.tail).iter().zip(b.chunks_exact_mut(8)) {
            c.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        self.tail = self.tail.wrapping_add(1);
        self.seg
            .word64(CMD_TAIL)
            .store(self.tail, Ordering::Release);
        Some(Desc::decode(&b).map_err(CmdError::BadDesc))
    }
}

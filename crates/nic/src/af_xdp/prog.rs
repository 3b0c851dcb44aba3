//! The steering XDP program, assembled here as raw eBPF instructions.
//!
//! In C it would read:
//!
//! ```c
//! if (data + 14 > data_end) return XDP_PASS;
//! if (eth->h_proto == htons(ETH_P_ARP)) goto redirect;      // every ARP frame
//! if (eth->h_proto != htons(ETH_P_IP)) return XDP_PASS;
//! if (data + 34 > data_end) return XDP_PASS;
//! if (ip->daddr != steer_ip) return XDP_PASS;
//! redirect:
//! return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! ```
//!
//! With IPv6 addresses (`steer_ip6`, issue 25) an IPv6 frame is redirected
//! when its destination is one of them or the solicited-node group of one
//! (ff02::1:ffXX:XXXX, where Neighbor Solicitations for it go, RFC 4861
//! §7.2.2); every other IPv6 frame passes to the kernel:
//!
//! ```c
//! if (eth->h_proto == htons(ETH_P_IPV6)) {
//!     if (data + 54 > data_end) return XDP_PASS;
//!     for (a in steer_ip6 and their solicited-node groups)    // unrolled
//!         if (ip6->daddr == a) goto redirect;                 // 4 words each
//!     return XDP_PASS;
//! }
//! ```
//!
//! Without a steering address the program redirects every frame. Frames for
//! a queue without a socket in the map fall back to `XDP_PASS` (the low bits
//! of the flags argument of `bpf_redirect_map`).

#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

use super::sys::BpfInsn;

// Opcodes (linux/bpf_common.h, linux/bpf.h).
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const MOV64_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const ADD64_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const JGT_X: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X
const JEQ_K: u8 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
const JNE32_K: u8 = 0x56; // BPF_JMP32 | BPF_JNE | BPF_K
const JEQ32_K: u8 = 0x16; // BPF_JMP32 | BPF_JEQ | BPF_K
const JA: u8 = 0x05; // BPF_JMP | BPF_JA
const LD_DW_IMM: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// `BPF_PSEUDO_MAP_FD`: the immediate of a 64-bit load is a map fd.
const PSEUDO_MAP_FD: u8 = 1;
/// `BPF_FUNC_redirect_map`.
const FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`.
const XDP_PASS: i32 = 2;
/// `struct xdp_md` field offsets, in bytes.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

fn ins(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// Where a forward jump goes.
#[derive(Clone, Copy)]
enum Label {
    Redirect,
    Pass,
    /// The IPv6 checks.
    Ipv6,
}

/// A tiny assembler with forward-jump fix-ups.
struct Asm {
    insns: Vec<BpfInsn>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    fn emit(&mut self, i: BpfInsn) {
        self.insns.push(i);
    }

    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.emit(ins(code, dst, src, 0, imm));
    }

    fn finish(mut self, redirect: usize, pass: usize, ipv6: usize) -> Vec<BpfInsn> {
        for (at, label) in &self.fixups {
            let target = match label {
                Label::Redirect => redirect,
                Label::Pass => pass,
                Label::Ipv6 => ipv6,
            };
            self.insns[*at].off = (target as i64 - *at as i64 - 1) as i16;
        }
        self.insns
    }
}

/// The IPv6 destinations `steer_ip6` stands for: each address and its
/// solicited-node group, without repeats.
fn ipv6_destinations(steer_ip6: &[Ipv6Addr]) -> Vec<Ipv6Addr> {
    let mut all: Vec<Ipv6Addr> = Vec::with_capacity(steer_ip6.len() * 2);
    for &a in steer_ip6 {
        let o = a.octets();
        let group = Ipv6Addr::from([
            0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15],
        ]);
        for d in [a, group] {
            if !all.contains(&d) {
                all.push(d);
            }
        }
    }
    all
}

/// The steering program for the XSKMAP `map_fd` (see the module docs).
pub fn steering_program(
    map_fd: i32,
    steer_ip: Option<Ipv4Addr>,
    steer_ip6: &[Ipv6Addr],
) -> Vec<BpfInsn> {
    let mut a = Asm {
        insns: Vec::with_capacity(32),
        fixups: Vec::new(),
    };
    let v6 = if steer_ip.is_some() {
        ipv6_destinations(steer_ip6)
    } else {
        Vec::new()
    };
    let mut ipv6_at = 0;
    a.emit(ins(MOV64_X, 6, 1, 0, 0)); // r6 = ctx
    if let Some(ip) = steer_ip {
        // Loads are in host order; compare against the wire bytes read the same way.
        let arp = i32::from(u16::from_ne_bytes([0x08, 0x06]));
        let ipv4 = i32::from(u16::from_ne_bytes([0x08, 0x00]));
        let daddr = i32::from_ne_bytes(ip.octets());
        a.emit(ins(LDX_W, 2, 1, MD_DATA, 0)); // r2 = data
        a.emit(ins(LDX_W, 3, 1, MD_DATA_END, 0)); // r3 = data_end
        a.emit(ins(MOV64_X, 4, 2, 0, 0)); // r4 = data
        a.emit(ins(ADD64_K, 4, 0, 0, 14)); // r4 += sizeof(ethhdr)
        a.jump(JGT_X, 4, 3, 0, Label::Pass); // if r4 > data_end: pass
        a.emit(ins(LDX_H, 5, 2, 12, 0)); // r5 = eth->h_proto
        a.jump(JEQ_K, 5, 0, arp, Label::Redirect);
        if !v6.is_empty() {
            let ipv6 = i32::from(u16::from_ne_bytes([0x86, 0xdd]));
            a.jump(JEQ_K, 5, 0, ipv6, Label::Ipv6);
        }
        a.jump(JNE_K, 5, 0, ipv4, Label::Pass);
        a.emit(ins(MOV64_X, 4, 2, 0, 0)); // r4 = data
        a.emit(ins(ADD64_K, 4, 0, 0, 34)); // r4 += ethhdr + iphdr
        a.jump(JGT_X, 4, 3, 0, Label::Pass);
        a.emit(ins(LDX_W, 5, 2, 30, 0)); // r5 = ip->daddr
        a.jump(JNE32_K, 5, 0, daddr, Label::Pass);
        if !v6.is_empty() {
            a.jump(JA, 0, 0, 0, Label::Redirect);
            ipv6_at = a.insns.len();
            a.emit(ins(MOV64_X, 4, 2, 0, 0)); // r4 = data
            a.emit(ins(ADD64_K, 4, 0, 0, 54)); // r4 += ethhdr + ipv6hdr
            a.jump(JGT_X, 4, 3, 0, Label::Pass);
            for d in &v6 {
                // Four words of ip6->daddr (frame bytes 38..54): a
                // mismatch skips to the next address's block.
                let o = d.octets();
                for w in 0..4 {
                    let k =
                        i32::from_ne_bytes([o[w * 4], o[w * 4 + 1], o[w * 4 + 2], o[w * 4 + 3]]);
                    a.emit(ins(LDX_W, 5, 2, 38 + 4 * w as i16, 0));
                    if w < 3 {
                        // To the end of this 8-instruction block.
                        let skip = (6 - 2 * w) as i16;
                        a.emit(ins(JNE32_K, 5, 0, skip, k));
                    } else {
                        a.jump(JEQ32_K, 5, 0, k, Label::Redirect);
                    }
                }
            }
            a.jump(JA, 0, 0, 0, Label::Pass);
        }
    }
    let redirect = a.insns.len();
    a.emit(ins(LDX_W, 2, 6, MD_RX_QUEUE_INDEX, 0)); // r2 = rx_queue_index
    a.emit(ins(LD_DW_IMM, 1, PSEUDO_MAP_FD, 0, map_fd)); // r1 = &xsks
    a.emit(ins(0, 0, 0, 0, 0));
    a.emit(ins(MOV64_K, 3, 0, 0, XDP_PASS)); // r3 = fallback action
    a.emit(ins(CALL, 0, 0, 0, FUNC_REDIRECT_MAP));
    a.emit(ins(EXIT, 0, 0, 0, 0));
    let pass = a.insns.len();
    // The verifier rejects unreachable code: no pass block without jumps.
    if !a.fixups.is_empty() {
        a.emit(ins(MOV64_K, 0, 0, 0, XDP_PASS));
        a.emit(ins(EXIT, 0, 0, 0, 0));
    }
    a.finish(redirect, pass, ipv6_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steer_ip_program_jumps_land_inside() {
        let p = steering_program(3, Some(Ipv4Addr::new(10, 1, 2, 3)), &[]);
        assert!(p.len() < 40);
        for (i, insn) in p.iter().enumerate() {
            if matches!(insn.code, JGT_X | JEQ_K | JNE_K | JNE32_K) {
                let target = i as i64 + 1 + i64::from(insn.off);
                assert!(target > i as i64 && (target as usize) < p.len());
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
    }

    /// Runs `p` over `frame` in a tiny interpreter of the instructions the
    /// program uses: true when it reaches the redirect call.
    fn redirects(p: &[BpfInsn], frame: &[u8]) -> bool {
        let mut r = [0u64; 11];
        let mut pc = 0;
        let data_end = frame.len() as u64;
        let load = |at: u64, n: usize| -> u64 {
            let b = &frame[at as usize..at as usize + n];
            let mut v = [0u8; 8];
            v[..n].copy_from_slice(b);
            u64::from_ne_bytes(v)
        };
        loop {
            let i = p[pc];
            let (dst, src) = (usize::from(i.regs & 0x0f), usize::from(i.regs >> 4));
            let jump = |c: bool| if c { i.off as i64 } else { 0 };
            let mut next = pc as i64 + 1;
            match i.code {
                MOV64_X => r[dst] = r[src],
                MOV64_K => r[dst] = i.imm as u64,
                ADD64_K => r[dst] = r[dst].wrapping_add(i.imm as u64),
                LDX_W if src == 1 || src == 6 => {
                    r[dst] = match i.off {
                        MD_DATA => 0,
                        MD_DATA_END => data_end,
                        _ => 0,
                    }
                }
                LDX_W => r[dst] = load(r[src] + i.off as u64, 4),
                LDX_H => r[dst] = load(r[src] + i.off as u64, 2),
                JGT_X => next += jump(r[dst] > r[src]),
                JEQ_K => next += jump(r[dst] == i.imm as u64),
                JNE_K => next += jump(r[dst] != i.imm as u64),
                JEQ32_K => next += jump(r[dst] as u32 == i.imm as u32),
                JNE32_K => next += jump(r[dst] as u32 != i.imm as u32),
                JA => next += i.off as i64,
                LD_DW_IMM => next += 1,
                CALL => return true,
                EXIT => return false,
                c => panic!("opcode {c:#x}"),
            }
            pc = next as usize;
        }
    }

    fn frame(ethertype: u16, dst_at: usize, dst: &[u8], len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[dst_at..dst_at + dst.len()].copy_from_slice(dst);
        f
    }

    #[test]
    fn ipv6_program_redirects_our_addresses_and_groups_only() {
        let ours: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let ll: Ipv6Addr = "fe80::ff:fe00:2".parse().unwrap();
        let v4 = Ipv4Addr::new(10, 1, 2, 3);
        let p = steering_program(3, Some(v4), &[ll, ours]);
        for (i, insn) in p.iter().enumerate() {
            if matches!(insn.code, JGT_X | JEQ_K | JNE_K | JNE32_K | JEQ32_K | JA) {
                let target = i as i64 + 1 + i64::from(insn.off);
                assert!(target > i as i64 && (target as usize) < p.len(), "{i}");
            }
        }
        let v6 = |a: Ipv6Addr| frame(0x86dd, 38, &a.octets(), 80);
        assert!(redirects(&p, &v6(ours)));
        assert!(redirects(&p, &v6(ll)));
        assert!(redirects(&p, &v6("ff02::1:ff00:2".parse().unwrap())));
        assert!(!redirects(&p, &v6("2001:db8::3".parse().unwrap())));
        assert!(!redirects(&p, &v6("ff02::1".parse().unwrap())));
        assert!(!redirects(&p, &v6("ff02::1:ff00:3".parse().unwrap())));
        assert!(
            !redirects(&p, &frame(0x86dd, 38, &ours.octets()[..12], 50)),
            "short"
        );
        assert!(redirects(&p, &frame(0x0800, 30, &v4.octets(), 60)));
        assert!(!redirects(&p, &frame(0x0800, 30, &[10, 1, 2, 4], 60)));
        assert!(redirects(&p, &frame(0x0806, 20, &[], 60)));
        assert!(!redirects(&p, &frame(0x88cc, 20, &[], 60)));
        // Without IPv6 addresses the IPv4 program is unchanged.
        let p4 = steering_program(3, Some(v4), &[]);
        assert!(!redirects(&p4, &v6(ours)));
        assert!(redirects(&p4, &frame(0x0800, 30, &v4.octets(), 60)));
    }

    #[test]
    fn no_steer_ip_program_redirects_everything() {
        let p = steering_program(3, None, &[]);
        assert_eq!(p.len(), 7);
        assert!(p
            .iter()
            .any(|i| i.code == CALL && i.imm == FUNC_REDIRECT_MAP));
    }
}

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
//! Without a steering address the program redirects every frame. Frames for
//! a queue without a socket in the map fall back to `XDP_PASS` (the low bits
//! of the flags argument of `bpf_redirect_map`).

#![forbid(unsafe_code)]

use std::net::Ipv4Addr;

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

    fn finish(mut self, redirect: usize, pass: usize) -> Vec<BpfInsn> {
        for (at, label) in &self.fixups {
            let target = match label {
                Label::Redirect => redirect,
                Label::Pass => pass,
            };
            self.insns[*at].off = (target as i64 - *at as i64 - 1) as i16;
        }
        self.insns
    }
}

/// The steering program for the XSKMAP `map_fd` (see the module docs).
pub fn steering_program(map_fd: i32, steer_ip: Option<Ipv4Addr>) -> Vec<BpfInsn> {
    let mut a = Asm {
        insns: Vec::with_capacity(32),
        fixups: Vec::new(),
    };
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
        a.jump(JNE_K, 5, 0, ipv4, Label::Pass);
        a.emit(ins(MOV64_X, 4, 2, 0, 0)); // r4 = data
        a.emit(ins(ADD64_K, 4, 0, 0, 34)); // r4 += ethhdr + iphdr
        a.jump(JGT_X, 4, 3, 0, Label::Pass);
        a.emit(ins(LDX_W, 5, 2, 30, 0)); // r5 = ip->daddr
        a.jump(JNE32_K, 5, 0, daddr, Label::Pass);
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
    a.finish(redirect, pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steer_ip_program_jumps_land_inside() {
        let p = steering_program(3, Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert!(p.len() < 40);
        for (i, insn) in p.iter().enumerate() {
            if matches!(insn.code, JGT_X | JEQ_K | JNE_K | JNE32_K) {
                let target = i as i64 + 1 + i64::from(insn.off);
                assert!(target > i as i64 && (target as usize) < p.len());
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
    }

    #[test]
    fn no_steer_ip_program_redirects_everything() {
        let p = steering_program(3, None);
        assert_eq!(p.len(), 7);
        assert!(p
            .iter()
            .any(|i| i.code == CALL && i.imm == FUNC_REDIRECT_MAP));
    }
}

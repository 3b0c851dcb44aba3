//! ECN (RFC 3168) and DCTCP (RFC 8257) between two Tcbs.

use wire::tcp::TcpFlags;

use super::delayed::*;
use super::*;
use crate::tcp::{CcKind, TcpConfig};

fn ecn_cfg(cc: CcKind) -> TcpConfig {
    TcpConfig {
        ecn: true,
        ..cfg(cc, true)
    }
}

#[test]
fn syn_sent_ecn_configured_negotiates_with_ece_cwr_and_data_is_ect() {
    let c = ecn_cfg(CcKind::Cubic);
    let mut a = Host::connect(&c, ISS_A);
    let syn = a.output(T0);
    assert!(syn[0].flags().ece() && syn[0].flags().cwr());
    let mut b = Host::accept(&c, &syn[0], ISS_B);
    let sa = b.output(T0);
    assert!(sa[0].flags().ece() && !sa[0].flags().cwr());
    a.input(&sa[0], T0);
    assert!(a.tcb.ecn_enabled() && b.tcb.ecn_enabled());
    a.write(&[1; 100]);
    let out = a.output_ect(T0);
    assert!(out.iter().any(|(w, ect)| w.payload.len() == 100 && *ect));
}

#[test]
fn syn_sent_default_config_offers_no_ecn() {
    let c = TcpConfig::default();
    let mut a = Host::connect(&c, ISS_A);
    let syn = a.output(T0);
    assert!(!syn[0].flags().ece() && !syn[0].flags().cwr());
    // A peer offering ECN is not answered with ECE.
    let ecn_syn = {
        let mut s = syn[0].clone();
        s.repr.flags = TcpFlags(s.repr.flags.0 | TcpFlags::ECE | TcpFlags::CWR);
        s
    };
    let mut b = Host::accept(&c, &ecn_syn, ISS_B);
    let sa = b.output(T0);
    assert!(!sa[0].flags().ece());
    assert!(!b.tcb.ecn_enabled());
    a.input(&sa[0], T0);
    a.write(&[1; 100]);
    assert!(a.output_ect(T0).iter().all(|(_, ect)| !ect));
}

/// `a` sends `n` full segments of `pattern(n * mss, salt)` at `t`, and
/// from now on every segment `b` takes arrived marked CE. Returns the
/// segments and `a`'s cwnd after sending them.
fn send_to_ce_path(
    a: &mut Host,
    b: &mut Host,
    t: Instant,
    n: usize,
    salt: u8,
) -> (Vec<Wire>, usize) {
    a.write(&pattern(n * a.tcb.mss(), salt));
    let segs = a.output(t);
    let cwnd = a.tcb.cwnd();
    b.tcb.input_ecn(true);
    (segs, cwnd)
}

#[test]
fn established_ce_mark_echoes_ece_until_cwr_and_sender_reduces_once_per_window() {
    let (mut a, mut b, t) = warm(&ecn_cfg(CcKind::Cubic));
    assert!(a.tcb.ecn_enabled());
    let mss = a.tcb.mss();
    let (segs, cwnd) = send_to_ce_path(&mut a, &mut b, t, 4, 8);
    b.input(&segs[0], t + ms(D));
    b.input(&segs[1], t + ms(D));
    let ack1 = b.output(t + ms(D));
    assert!(ack1[0].flags().ece(), "CE echoed");
    b.input(&segs[2], t + ms(D));
    b.input(&segs[3], t + ms(D));
    let ack2 = b.output(t + ms(D));
    assert!(ack2[0].flags().ece(), "ECE repeats until CWR");
    a.input(&ack1[0], t + ms(2 * D));
    assert_eq!(a.tcb.stats().ecn_reductions, 1);
    assert_eq!(a.tcb.cwnd(), (cwnd as f64 * 0.7) as usize);
    a.input(&ack2[0], t + ms(2 * D));
    assert_eq!(a.tcb.stats().ecn_reductions, 1, "once per window");
    // The next new data carries CWR; b stops echoing.
    a.write(&pattern(mss, 9));
    let out = a.output(t + ms(2 * D));
    assert!(out[0].flags().cwr());
    b.input(&out[0], t + ms(3 * D));
    b.timer(t + ms(3 * D + 40));
    let ack3 = b.output(t + ms(3 * D + 40));
    assert!(!ack3[0].flags().ece());
}

#[test]
fn established_dctcp_echoes_ce_exactly_and_cuts_by_alpha() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::Dctcp, true));
    assert!(a.tcb.ecn_enabled(), "DCTCP offers ECN on its own");
    let (segs, cwnd) = send_to_ce_path(&mut a, &mut b, t, 2, 10);
    b.input(&segs[0], t + ms(D));
    let ack1 = b.output(t + ms(D));
    assert!(ack1[0].flags().ece(), "CE state change is ACKed at once");
    b.input(&segs[1], t + ms(D));
    let ack2 = b.output(t + ms(D));
    assert!(!ack2[0].flags().ece(), "unmarked segment: no ECE");
    let alpha_before = a.tcb.dctcp_alpha().expect("dctcp");
    a.input(&ack1[0], t + ms(2 * D));
    // The window ends with all bytes marked: alpha += g * (1 - alpha);
    // then cwnd * (1 - alpha/2).
    let alpha = a.tcb.dctcp_alpha().expect("dctcp");
    assert_eq!(alpha, alpha_before - (alpha_before >> 4) + (1024 >> 4));
    assert_eq!(a.tcb.cwnd(), cwnd - cwnd * alpha as usize / 2048);
    assert_eq!(a.tcb.stats().ecn_reductions, 1);
}

//! `%{ assert }%`: a connection's TCP_INFO-like figures under Linux's
//! names, and the engine's counters.

use super::*;

impl Runner {
    pub(super) fn assert(&mut self, all: &[Assertion]) -> Outcome {
        self.poll();
        let mut tcbs: Vec<Info> = Vec::new();
        self.engine.for_each_tcb(|t| tcbs.push(Info::of(t)));
        let stats = self.engine.stats();
        for a in all {
            let got = if let Some(name) = a.name.strip_prefix("stat.") {
                stats
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v as i64)
                    .ok_or_else(|| format!("no engine counter {name}"))?
            } else if a.name == "tcpi_connections" {
                tcbs.len() as i64
            } else {
                let [t] = tcbs.as_slice() else {
                    return Err(format!(
                        "{}: {} connections, the assertion needs exactly one",
                        a.name,
                        tcbs.len()
                    ));
                };
                t.get(&a.name)
                    .ok_or_else(|| format!("unknown field {}", a.name))?
            };
            let ok = match a.op.as_str() {
                "==" => got == a.value,
                "!=" => got != a.value,
                "<" => got < a.value,
                "<=" => got <= a.value,
                ">" => got > a.value,
                _ => got >= a.value,
            };
            if !ok {
                return Err(format!(
                    "assert {} {} {} failed: it is {got}",
                    a.name, a.op, a.value
                ));
            }
        }
        Ok(())
    }
}

/// A connection's TCP_INFO-like figures.
struct Info {
    state: State,
    cwnd: usize,
    ssthresh: usize,
    mss: usize,
    rto_us: u64,
    rtt_us: u64,
    retries: u32,
    retrans: u64,
    in_flight: usize,
    snd_wnd: usize,
    rcv_wnd: usize,
}

impl Info {
    fn of(t: &Tcb) -> Info {
        Info {
            state: t.state(),
            cwnd: t.cwnd(),
            ssthresh: t.ssthresh(),
            mss: t.mss(),
            rto_us: t.rto().as_micros() as u64,
            rtt_us: t.srtt_us(),
            retries: t.retries(),
            retrans: t.stats().retransmits,
            in_flight: t.bytes_in_flight(),
            snd_wnd: t.snd_wnd(),
            rcv_wnd: t.rcv_wnd(),
        }
    }

    fn get(&self, name: &str) -> Option<i64> {
        let mss = self.mss.max(1);
        Some(match name {
            "tcpi_state" => linux_state(self.state),
            "tcpi_snd_cwnd" => (self.cwnd / mss) as i64,
            "tcpi_snd_ssthresh" => (self.ssthresh.min(i32::MAX as usize) / mss) as i64,
            "tcpi_snd_mss" => self.mss as i64,
            "tcpi_rto" => self.rto_us as i64,
            "tcpi_rtt" => self.rtt_us as i64,
            "tcpi_retransmits" => i64::from(self.retries),
            "tcpi_total_retrans" => self.retrans as i64,
            "tcpi_unacked" => self.in_flight.div_ceil(mss) as i64,
            "tcpi_snd_wnd" => self.snd_wnd as i64,
            "tcpi_rcv_wnd" => self.rcv_wnd as i64,
            _ => return None,
        })
    }
}

/// Linux's number for `s` (include/net/tcp_states.h).
fn linux_state(s: State) -> i64 {
    let name = match s {
        State::Established => "TCP_ESTABLISHED",
        State::SynSent => "TCP_SYN_SENT",
        State::SynReceived => "TCP_SYN_RECV",
        State::FinWait1 => "TCP_FIN_WAIT1",
        State::FinWait2 => "TCP_FIN_WAIT2",
        State::TimeWait => "TCP_TIME_WAIT",
        State::Closed => "TCP_CLOSE",
        State::CloseWait => "TCP_CLOSE_WAIT",
        State::LastAck => "TCP_LAST_ACK",
        State::Listen => "TCP_LISTEN",
        State::Closing => "TCP_CLOSING",
    };
    parse::state_value(name).unwrap_or(0)
}

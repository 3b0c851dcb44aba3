//! Engine counters: every frame dropped is counted under the reason it was
//! dropped, like `nstat`. The engine owns them; readers get copies.

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Per-engine counters (packets or events unless the name says bytes).
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Stats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Stats {
            /// Every counter with its name, in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$((stringify!($name), self.$name),)*].into_iter()
            }

            /// Adds every counter of `other` to this one's (the totals of
            /// several engines).
            pub fn add(&mut self, other: &Stats) {
                $(self.$name += other.$name;)*
            }

            /// Every counter's name with its doc comment as written in the
            /// source (one `doc = "..."` line per comment line), in
            /// declaration order: the help text of `corestack stat
            /// --prometheus`.
            pub fn docs() -> impl Iterator<Item = (&'static str, &'static str)> {
                [$((stringify!($name), concat!($(stringify!($doc), "\n",)*)),)*].into_iter()
            }
        }
    };
}

impl Stats {
    /// Counts a transmit attempt: `frames` frames of `bytes` bytes in all
    /// when `sent`, else one `tx_no_buffer`. Returns `sent`.
    #[inline]
    pub fn count_tx(&mut self, sent: bool, frames: usize, bytes: usize) -> bool {
        if sent {
            self.tx_frames += frames as u64;
            self.tx_bytes += bytes as u64;
        } else {
            self.tx_no_buffer += 1;
        }
        sent
    }
}

counters! {
    /// Frames received from the port.
    rx_frames,
    /// Frames the port dropped because its rx ring was full: the engine
    /// fell behind the NIC (AF_XDP XDP_STATISTICS rx_ring_full).
    rx_ring_full,
    /// Frames the port dropped for want of a free receive buffer (AF_XDP
    /// fill ring empty).
    rx_fill_empty,
    /// Frames the port dropped for other reasons (AF_XDP rx_dropped).
    rx_port_dropped,
    /// Bytes received from the port (Ethernet frames).
    rx_bytes,
    /// Frames handed to the port.
    tx_frames,
    /// Bytes handed to the port.
    tx_bytes,
    /// Frames not sent because the port had no free tx buffer.
    tx_no_buffer,
    /// Iterations whose TCP output waited for the next one because the
    /// port was short of tx buffers (nothing is lost: the bytes wait in
    /// the connections' TX rings).
    tx_output_deferred,
    /// Frames shorter than an Ethernet header.
    drop_eth_truncated,
    /// Frames addressed to another MAC.
    drop_eth_other_mac,
    /// Frames of an ethertype we do not speak (VLAN, ..., and IPv6 while
    /// it is off).
    drop_eth_unsupported,
    /// ARP requests received for our address.
    arp_requests_rx,
    /// ARP replies received.
    arp_replies_rx,
    /// ARP requests sent.
    arp_requests_tx,
    /// ARP replies sent.
    arp_replies_tx,
    /// Peers' MACs gleaned from their SYNs to a listener, each to be
    /// confirmed by an ARP request (`arp::ArpCache::glean`).
    arp_gleaned,
    /// ARP packets that were truncated or not Ethernet/IPv4.
    drop_arp_malformed,
    /// ARP requests for another address.
    drop_arp_other_target,
    /// Packets dropped because the ARP pending queue was full.
    drop_arp_pending_full,
    /// Packets dropped because their next hop never answered ARP.
    drop_arp_unresolved,
    /// IPv4 packets that were truncated or had bad header fields.
    drop_ipv4_malformed,
    /// IPv4 packets with a bad header checksum.
    drop_ipv4_checksum,
    /// IPv4 packets for another address.
    drop_ipv4_other_dst,
    /// IPv4 fragments received for our address (RFC 791 §3.2).
    frag_rx,
    /// Datagrams reassembled from fragments.
    frag_reassembled,
    /// Fragments ignored as exact repeats of bytes already received.
    frag_duplicate,
    /// Fragments with a bad length (empty, or not a multiple of 8 bytes
    /// with more to come), and datagrams split into too many holes.
    drop_frag_malformed,
    /// Datagrams dropped for overlapping fragments (a partial overlap, or a
    /// repeat with other bytes), or a length contradicting the last fragment.
    drop_frag_overlap,
    /// Datagrams dropped because they would exceed 65535 bytes.
    drop_frag_too_big,
    /// Datagrams not completed within the reassembly timeout (30 s).
    drop_frag_timeout,
    /// Datagrams evicted because every reassembly context was busy.
    drop_frag_no_context,
    /// IPv4 packets of a protocol other than ICMP, UDP, TCP.
    drop_ipv4_unsupported_proto,
    /// Packets to a destination with no route (not on-link, no gateway).
    drop_no_route,
    /// ICMP echo requests answered.
    icmp_echo_replies_tx,
    /// ICMP destination unreachable messages sent.
    icmp_unreachable_tx,
    /// ICMP and ICMPv6 errors not sent because of the rate limit (one
    /// budget, `icmp_errors_per_sec`).
    icmp_rate_limited,
    /// ICMP messages received other than echo requests.
    icmp_other_rx,
    /// ICMP errors quoting a segment of one of our TCP connections
    /// (RFC 1122 §4.2.3.9); counted only, the connection is not changed.
    icmp_tcp_errors_rx,
    /// IPv4 path MTUs lowered by Fragmentation Needed (RFC 1191), never
    /// below 552.
    icmp_pmtu_reductions,
    /// Fragmentation Needed messages that changed nothing: not quoting a
    /// segment in flight on a connection of ours (RFC 5927 §5.2), a bogus
    /// MTU, or not lowering the path MTU or the connection's MSS.
    icmp_frag_needed_ignored,
    /// ICMP messages that were truncated or had a bad checksum.
    drop_icmp_malformed,
    /// UDP datagrams delivered to a socket.
    udp_rx,
    /// UDP datagrams sent.
    udp_tx,
    /// UDP datagrams that were truncated or had a bad length.
    drop_udp_malformed,
    /// UDP datagrams with a bad checksum.
    drop_udp_checksum,
    /// UDP datagrams to a port with no socket (answered with port unreachable).
    drop_udp_no_socket,
    /// UDP datagrams dropped because the socket's RX ring was full.
    drop_udp_rx_full,
    /// UDP records in a TX ring that were malformed (oversized or truncated).
    drop_udp_tx_malformed,
    /// TCP segments received.
    tcp_rx_segments,
    /// TCP segments sent.
    tcp_tx_segments,
    /// TSO segments handed to the port (each also counts in `tcp_tx_segments`
    /// as the segments the port cuts it into).
    tcp_tso_sends,
    /// TCP segments that were truncated or had bad header or option lengths.
    drop_tcp_malformed,
    /// TCP segments with a bad checksum.
    drop_tcp_checksum,
    /// TCP segments for no connection or listener (answered with RST).
    tcp_no_socket,
    /// RSTs sent for segments that matched no connection.
    tcp_rst_tx,
    /// SYNs dropped because the listener's backlog was full (cookies off),
    /// or connections reset because the accept queue was full.
    drop_tcp_backlog_full,
    /// SYNs dropped because the listener's accept queue was full (Linux
    /// ListenOverflows): the client sends the SYN again.
    drop_tcp_accept_queue_full,
    /// SYN-ACKs sent with a SYN cookie (the SYN queue was full).
    tcp_syncookies_sent,
    /// Connections opened from a valid SYN cookie.
    tcp_syncookies_ok,
    /// SYNs or connects refused because the connection table was full.
    drop_tcp_table_full,
    /// Connections whose MSS went down after ICMP "fragmentation needed"
    /// (RFC 1191) or "packet too big" (RFC 8201), or to a smaller path MTU
    /// another connection to the same destination learned.
    tcp_pmtu_reductions,
    /// Connections whose MSS fell back to the search floor (1024-byte
    /// packets over IPv4, 1280 over IPv6) after three consecutive RTOs of
    /// a bigger segment: a path that drops big packets without ICMP (RFC
    /// 4821 §7.7).
    tcp_pmtu_blackholes,
    /// Path MTU probes sent after a black-hole fallback, a segment between
    /// the MSS that works and the smallest that failed (RFC 4821 §7.5).
    tcp_pmtu_probes,
    /// Path MTU probes that arrived: the connection's MSS went up to them.
    tcp_pmtu_probes_ok,
    /// TCP segments sent again (RTO, fast, RACK, TLP).
    tcp_retransmits,
    /// Retransmission timeouts.
    tcp_rto_timeouts,
    /// SACK-based loss recoveries entered.
    tcp_sack_recoveries,
    /// Losses detected by RACK.
    tcp_rack_losses,
    /// Tail loss probes sent.
    tcp_tlp_probes,
    /// Probes sent in SACK recoveries whose ACK clock stopped.
    tcp_recovery_probes,
    /// Retransmissions found spurious by D-SACK.
    tcp_spurious_retransmits,
    /// Out-of-order arrivals reported by the ACK of their receive batch
    /// instead of a duplicate ACK each (Linux's TCPAckCompressed).
    tcp_acks_compressed,
    /// Segments whose data was not acceptable (a full or zero receive
    /// window) whose ACK field was processed (RFC 9293 §3.10.7.4).
    tcp_acks_of_unacceptable,
    /// Retransmission timeouts found spurious (RFC 3522) and undone.
    tcp_spurious_rtos,
    /// In-order payload bytes dropped because a receive buffer was full.
    tcp_rcv_full_dropped_bytes,
    /// Connections opened by connect().
    tcp_active_opens,
    /// Connections in TIME-WAIT ended early for a new incarnation of their
    /// 4-tuple (RFC 6191): a newer SYN from the peer, or an active open
    /// that took the port (timestamps in use, a second after the close).
    tcp_time_wait_recycled,
    /// Connections in TIME-WAIT whose application let go, replaced by a
    /// compact record without their Conn ([`crate::tcp::tw_records`]). Records
    /// held now: this less `tcp_time_wait_ended`
    /// ([`crate::Engine::time_wait_records`]).
    tcp_time_wait_entered,
    /// TIME-WAIT records ended: expired, taken by a new incarnation (RFC
    /// 6191, port reuse) or reset.
    tcp_time_wait_ended,
    /// ACKs sent by TIME-WAIT records (retransmitted FINs, old or
    /// unacceptable segments, challenge ACKs).
    tcp_time_wait_acks,
    /// Connections accepted from listeners.
    tcp_passive_opens,
    /// Connections that ended with a reset (sent or received).
    tcp_resets,
    /// Connections that ended with ETIMEDOUT.
    tcp_timeouts,
    /// Commands naming a socket the engine does not know.
    cmd_unknown_socket,
    /// Timer wheel expirations processed.
    timers_fired,
    /// Iterations asked to run at a time earlier than the one before (a
    /// caller that read the clock, then waited for the engine's lock or lost
    /// its CPU): they ran at the earlier iteration's time instead, so that
    /// time never goes backwards inside the engine (an RTT sample taken
    /// backwards would read 0 and pin BBR's min_rtt there for 10 s).
    clock_backwards,
    /// Timer wheel entries looked at while expiring (due or not): the
    /// wheel's work, which follows the timers held, not the sockets.
    timer_entries_scanned,
    /// Socket slots visited by housekeeping passes (orphaned and
    /// misbehaving sockets), a bounded number per pass.
    housekeeping_slots,
    /// Socket slots visited to publish the connection table for
    /// `corestack ss`, a bounded number per publication.
    published_slots,
    /// Bytes idle connections gave back, found by housekeeping: ring pages
    /// returned to the kernel and freed retransmission and out-of-order
    /// queues (each comes back with the next data that needs it).
    idle_bytes_released,
    /// Frames received on this engine's queue that another engine owns
    /// (the NIC did not steer them: veth, TAP, a NIC without RSS).
    rx_foreign,
    /// Records handed to other engines: frames they own, reassembled
    /// datagrams, copies of ARP and Neighbor Discovery packets to learn from.
    handoff_tx,
    /// Records taken from other engines' handoff rings.
    handoff_rx,
    /// Records not handed over because the ring to their owner was full
    /// (the frame is lost, as on a full NIC queue).
    handoff_dropped,
    /// TCP segments that reached a connection on an engine that does not
    /// own their flow: always 0 unless steering is broken.
    owner_violations,
    /// IPv6 packets received and parsed, for us or not.
    ipv6_rx,
    /// IPv6 packets that were truncated or not version 6.
    drop_ipv6_malformed,
    /// IPv6 packets from a multicast source address (RFC 4291 §2.7).
    drop_ipv6_bad_src,
    /// IPv6 packets for none of our addresses (a tentative one under
    /// Duplicate Address Detection is not ours yet), their solicited-node
    /// groups, or all-nodes ff02::1.
    drop_ipv6_other_dst,
    /// IPv6 packets whose extension header chain was truncated, malformed,
    /// too long (more than 8 headers or past 1232 bytes) or had a
    /// Hop-by-Hop header not first (RFC 8200 §4).
    drop_ipv6_ext_malformed,
    /// IPv6 packets with an unrecognized option whose type says discard
    /// (RFC 8200 §4.2).
    drop_ipv6_ext_option,
    /// IPv6 packets with a Type 0 Routing header and Segments Left > 0
    /// (RFC 5095).
    drop_ipv6_rh0,
    /// IPv6 packets with a Routing header of another type we do not
    /// implement and Segments Left > 0 (RFC 8200 §4.4).
    drop_ipv6_routing,
    /// IPv6 packets whose upper-layer Next Header we do not recognize
    /// (answered with Parameter Problem code 1, RFC 8200 §4).
    drop_ipv6_unknown_next_header,
    /// IPv6 TCP and UDP packets, dropped until TCP and UDP run over IPv6.
    drop_ipv6_transport,
    /// IPv6 packets with No Next Header (59), ignored (RFC 8200 §4.7).
    ipv6_no_next_header,
    /// IPv6 packets not sent: no route (off-link, no IPv6 gateway).
    drop_ipv6_no_route,
    /// IPv6 packets not sent for exceeding the link MTU (corestack does not
    /// fragment what it sends).
    drop_ipv6_too_big,
    /// IPv6 fragments received for us (RFC 8200 §4.5), atomic ones excluded.
    ipv6_frag_rx,
    /// Atomic fragments (offset 0, M clear) handled as whole packets
    /// (RFC 6946).
    ipv6_frag_atomic,
    /// IPv6 datagrams reassembled from fragments.
    ipv6_frag_reassembled,
    /// IPv6 fragments ignored as exact repeats of bytes already received.
    ipv6_frag_duplicate,
    /// IPv6 fragments with a bad length (empty, or not a multiple of 8
    /// bytes with M set), and datagrams split into too many holes.
    drop_ipv6_frag_malformed,
    /// IPv6 datagrams dropped for overlapping fragments (RFC 5722) or a
    /// length contradicting the last fragment.
    drop_ipv6_frag_overlap,
    /// IPv6 fragments whose datagram would exceed 65535 bytes of payload.
    drop_ipv6_frag_too_big,
    /// IPv6 first fragments without the whole header chain through the
    /// upper-layer header (RFC 7112); their datagram is dropped.
    drop_ipv6_frag_incomplete_chain,
    /// IPv6 datagrams not completed within 60 s (RFC 8200 §4.5).
    drop_ipv6_frag_timeout,
    /// IPv6 datagrams evicted because every reassembly context was busy.
    drop_ipv6_frag_no_context,
    /// ICMPv6 echo requests answered.
    icmpv6_echo_replies_tx,
    /// ICMPv6 echo requests not answered: to a multicast address, or
    /// their reply would exceed the MTU.
    drop_icmpv6_echo,
    /// ICMPv6 Destination Unreachable messages sent.
    icmpv6_unreachable_tx,
    /// ICMPv6 Parameter Problem messages sent.
    icmpv6_param_problem_tx,
    /// ICMPv6 errors not sent by RFC 4443 §2.4 (e): in answer to an
    /// error, to a multicast destination, or to a source that is not one
    /// node (the rate limit counts in `icmp_rate_limited`).
    icmpv6_errors_suppressed,
    /// ICMPv6 error messages received other than Packet Too Big.
    icmpv6_errors_rx,
    /// ICMPv6 informational messages received other than echo requests
    /// and Neighbor Discovery (ignored, RFC 4443 §2.4 (b)).
    icmpv6_other_rx,
    /// ICMPv6 messages that were truncated.
    drop_icmpv6_malformed,
    /// ICMPv6 messages with a bad checksum.
    drop_icmpv6_checksum,
    /// ICMPv6 Packet Too Big messages received.
    icmpv6_ptb_rx,
    /// Path MTUs lowered by Packet Too Big (RFC 8201), never below 1280.
    icmpv6_pmtu_reductions,
    /// Packet Too Big messages that changed nothing: not quoting a packet
    /// of ours, or not lowering the path MTU (RFC 8201 §4).
    icmpv6_ptb_ignored,
    /// Neighbor Solicitations received (RFC 4861 §7.2.3).
    nd_ns_rx,
    /// Neighbor Advertisements received (RFC 4861 §7.2.5).
    nd_na_rx,
    /// Neighbor Solicitations sent: resolution, unreachability probes, DAD.
    nd_ns_tx,
    /// Neighbor Advertisements sent.
    nd_na_tx,
    /// Router Solicitations and Advertisements and Redirects received,
    /// ignored by this host.
    nd_other_rx,
    /// Neighbor Discovery messages with a hop limit other than 255 (RFC
    /// 4861 §7.1: sent from off-link).
    drop_nd_hop_limit,
    /// Neighbor Discovery messages that failed validation (RFC 4861 §7.1:
    /// code, length, options, address rules) or had a bad checksum.
    drop_nd_malformed,
    /// Neighbor Discovery messages in fragmented packets (RFC 6980 §5).
    drop_nd_fragmented,
    /// Neighbor Solicitations for an address not ours (or tentative).
    drop_nd_other_target,
    /// IPv6 packets dropped because the neighbor waiting queue was full.
    drop_nd_pending_full,
    /// IPv6 packets dropped because their next hop never answered
    /// Neighbor Solicitations (RFC 4861 §7.3.3).
    drop_nd_unresolved,
    /// Addresses refused by Duplicate Address Detection (RFC 4862 §5.4.5).
    nd_dad_duplicates,
}

impl core::fmt::Display for Stats {
    /// The nonzero counters, one `name value` per line.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (name, v) in self.iter().filter(|(_, v)| *v != 0) {
            writeln!(f, "{name:<28} {v}")?;
        }
        Ok(())
    }
}

impl Stats {
    /// Adds what the TCB's counters `t` gained since `counted` (what was
    /// added before), and records them as counted: O(1), so the totals stay
    /// current as connections run, with no pass over the connections.
    pub fn fold_tcb(&mut self, t: &crate::tcp::TcbStats, counted: &mut crate::tcp::TcbStats) {
        let d = |now: u64, then: u64| now.wrapping_sub(then);
        self.tcp_retransmits += d(t.retransmits, counted.retransmits);
        self.tcp_rto_timeouts += d(t.timeouts, counted.timeouts);
        self.tcp_sack_recoveries += d(t.sack_recoveries, counted.sack_recoveries);
        self.tcp_rack_losses += d(t.rack_losses, counted.rack_losses);
        self.tcp_tlp_probes += d(t.tlp_probes, counted.tlp_probes);
        self.tcp_recovery_probes += d(t.recovery_probes, counted.recovery_probes);
        self.tcp_spurious_retransmits += d(t.spurious_retransmits, counted.spurious_retransmits);
        self.tcp_acks_compressed += d(t.acks_compressed, counted.acks_compressed);
        self.tcp_acks_of_unacceptable += d(t.acks_of_unacceptable, counted.acks_of_unacceptable);
        self.tcp_spurious_rtos += d(t.spurious_rtos, counted.spurious_rtos);
        self.tcp_pmtu_blackholes += d(t.pmtu_blackholes, counted.pmtu_blackholes);
        self.tcp_pmtu_probes += d(t.pmtu_probes, counted.pmtu_probes);
        self.tcp_pmtu_probes_ok += d(t.pmtu_probes_ok, counted.pmtu_probes_ok);
        self.tcp_rcv_full_dropped_bytes +=
            d(t.rcv_full_dropped_bytes, counted.rcv_full_dropped_bytes);
        *counted = *t;
    }
}

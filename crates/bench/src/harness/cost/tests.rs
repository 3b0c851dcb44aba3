use super::classify::{classify, rust_crate, samples};
use super::probe::{dev_packets, stat_counts, status_switches};
use super::*;

/// `perf script -F comm,pid,ip,sym,dso` of real `perf record -g -e cpu-clock` runs on this
/// project's development VM (memcached on Linux, inline and embedded), a sample of each kind.
const FIXTURE: &str = include_str!("perf-script.txt");

#[test]
fn perf_script_fixture_samples_each_go_to_their_category() {
    use Category::*;
    let s = samples(FIXTURE);
    let got: Vec<Category> = s.iter().map(|s| classify(&s.frames)).collect();
    let want = [
        Engine,         // engine::tcp::output::<impl engine::tcp::tcb::Tcb>::emit_data
        Engine,         // wire::tcp::TcpRepr::parse_with
        Nic,            // <nic::af_xdp::AfXdpPort as nic::Port>::rx_burst
        AppInterface,   // appif::bytes::Reader::len
        AppInterface,   // corestack::stack::wait::...::poll_inline
        Shim,           // corestack_preload::epoll::regs::Regs::mark
        CorestackOther, // core::hash::BuildHasher::hash_one in the shim's object
        VdsoClock,      // __vdso_clock_gettime
        Application,    // memcached's own code, no symbols
        Application,    // libc's memmove
        Application,    // libevent
        KernelTx,       // packet_sendmsg, then the peer's receive in the softirq it raised
        KernelTx,       // __xsk_generic_xmit from poll() on the XSK
        KernelTx,       // tcp_sendmsg
        KernelRx,       // tcp_recvmsg
        Waits,          // do_epoll_wait (sock_poll of the ready list)
        Waits,          // xsk_poll from poll() with nothing to send
        Waits,          // eventfd_write (waking the waiter)
        Waits,          // eventfd_read
        Waits,          // clock_nanosleep of memcached's LRU maintainer
        OtherKernel,    // a page fault
        OtherKernel,    // the system call entry itself
    ];
    assert_eq!(got, want);
    assert_eq!(s[0].comm, "mc-worker");
    assert_eq!(s[0].pid, 23991);
    assert_eq!(s[12].comm, "corestack-engin");
    assert_eq!(s[11].frames.len(), 22, "every frame of the sample is read");
    assert_eq!(s[11].frames[0].sym, "__skb_checksum_complete");
    assert_eq!(s[11].frames[0].dso, "[kernel.kallsyms]");
    assert_eq!(s[11].frames[0].ip, 0xffff_ffff_81e8_eabb);
    let c = Counts::of(FIXTURE, &[]);
    assert_eq!(c.total(), 22);
    assert_eq!((c.get(KernelTx), c.get(Waits), c.get(Engine)), (3, 5, 2));
    // The samples of one process only (perf record samples whole CPUs).
    let embedded = Counts::of(FIXTURE, &[24047]);
    assert_eq!((embedded.total(), embedded.get(Waits)), (4, 3));
}

#[test]
fn perf_script_header_comm_with_spaces_and_stray_lines_are_read() {
    let text = "Web Content 42 \n\
                \t ffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])\n\
                \tnot a frame\n\n\
                garbage without pid x\n\
                tokio-rt 7\n\
                \t 1234 engine::Engine::poll (/opt/bin/corestack)\n";
    let s = samples(text);
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].comm, s[0].pid, s[0].frames.len()),
        ("Web Content", 42, 1)
    );
    assert_eq!(classify(&s[0].frames), Category::OtherKernel);
    assert_eq!(
        classify(&s[1].frames),
        Category::Engine,
        "the daemon binary"
    );
    assert_eq!(classify(&[]), Category::OtherKernel);
}

#[test]
fn kernel_stack_tx_wins_over_rx_and_rx_over_waits_and_busy_poll_spin_is_waiting() {
    let frames = |syms: &[&'static str]| -> Vec<classify::Frame<'static>> {
        syms.iter()
            .map(|&sym| classify::Frame {
                ip: 0xffff_ffff_8100_0000,
                sym,
                dso: "[kernel.kallsyms]",
            })
            .collect()
    };
    let rx_in_wait = frames(&["tcp_v4_rcv", "net_rx_action", "do_epoll_wait"]);
    assert_eq!(classify(&rx_in_wait), Category::KernelRx);
    let spin = frames(&["veth_poll", "napi_busy_loop", "ep_poll", "do_epoll_wait"]);
    assert_eq!(classify(&spin), Category::Waits);
    let suffixed = frames(&["ep_item_poll.isra.0", "do_epoll_wait.part.0"]);
    assert_eq!(classify(&suffixed), Category::Waits);
    let futex = frames(&["futex_wait_queue", "__x64_sys_futex"]);
    assert_eq!(classify(&futex), Category::Waits);
    let ack = frames(&["tcp_send_ack", "tcp_recvmsg", "inet_recvmsg"]);
    assert_eq!(classify(&ack), Category::KernelRx);
}

#[test]
fn rust_symbols_go_to_the_first_corestack_crate_they_name() {
    use Category::*;
    for (sym, want) in [
        (
            "engine::tcp::input::<impl engine::tcp::tcb::Tcb>::input",
            Engine,
        ),
        ("<nic::af_xdp::AfXdpPort as nic::Port>::tx_burst", Nic),
        ("core::ptr::drop_in_place<engine::tcp::tcb::Tcb>", Engine),
        ("<alloc::vec::Vec<T> as corestack_preload::Foo>::bar", Shim),
        ("service::host::Host::run", AppInterface),
        ("corestack_preload::service::Join::hello", Shim),
        ("hashbrown::raw::RawTable<T,A>::find", CorestackOther),
        ("[unknown]", CorestackOther),
    ] {
        assert_eq!(rust_crate(sym), want, "{sym}");
    }
}

#[test]
fn perf_stat_csv_gives_syscalls_and_switches() {
    // perf stat -x , -o FILE output, captured on the development VM.
    let text = "# started on Wed Dec  2 18:40:54 2026\n\n\
                1850369,,raw_syscalls:sys_enter,776768033,100.00,,\n\
                138,,context-switches,776768033,100.00,,\n";
    assert_eq!(stat_counts(text), (Some(1_850_369), Some(138)));
    let refused = "<not counted>,,raw_syscalls:sys_enter,0,0.00,,\n";
    assert_eq!(stat_counts(refused), (None, None));
}

#[test]
fn proc_net_dev_and_status_give_packets_and_switches() {
    let dev = "Inter-|   Receive                                                |  Transmit\n \
               face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
               lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n    \
               s2: 9876543   40123    0    0    0     0          0         0 12345678   40200    0    0    0     0       0          0\n";
    assert_eq!(dev_packets(dev, "s2"), Some((40_123, 40_200)));
    assert_eq!(dev_packets(dev, "s1"), None);
    let status =
        "Name:\tmc-worker\nvoluntary_ctxt_switches:\t1500\nnonvoluntary_ctxt_switches:\t23\n";
    assert_eq!(status_switches(status), (1500, 23));
    assert_eq!(status_switches("Name:\tx\n"), (0, 0));
}

fn window(requests: u64, cpu_s: f64) -> Window {
    Window {
        requests,
        seconds: 2.0,
        cpu_s,
        syscalls: Some(3 * requests),
        switches: Some(requests / 2),
        voluntary_switches: requests / 4,
        nonvoluntary_switches: requests / 4,
        packets_in: Some(requests),
        packets_out: Some(2 * requests),
        perf_data: None,
        pids: Vec::new(),
        note: None,
    }
}

#[test]
fn breakdown_scales_sample_fractions_to_the_exact_cpu_per_request() {
    let w = window(100_000, 1.0);
    let b = Breakdown::from_counts(&w, Some(Counts::of(FIXTURE, &[])));
    assert!((b.cpu_us_per_req - 10.0).abs() < 1e-9);
    let sum: f64 = b.split.iter().map(|s| s.us_per_req).sum();
    assert!((sum - b.cpu_us_per_req).abs() < 1e-9, "{sum}");
    assert!((b.us(Category::Waits).unwrap() - 10.0 * 5.0 / 22.0).abs() < 1e-9);
    assert_eq!(b.syscalls_per_req, Some(3.0));
    assert_eq!(b.switches(), 0.5);
    assert_eq!(
        (b.packets_in_per_req, b.packets_out_per_req),
        (Some(1.0), Some(2.0))
    );
    assert_eq!(b.samples, 22);
    let without = Breakdown::from_counts(
        &Window {
            switches: None,
            note: Some("perf is not installed".into()),
            ..window(1000, 0.01)
        },
        None,
    );
    assert!(without.split.is_empty() && without.us(Category::Engine).is_none());
    assert_eq!(without.switches(), 0.5, "/proc's switches without perf");
    assert_eq!(without.note.as_deref(), Some("perf is not installed"));
}

#[test]
fn table_has_a_tuned_ratio_column_only_with_a_tuned_row() {
    let linux = Breakdown::from_counts(&window(1000, 0.010), Some(Counts::of(FIXTURE, &[])));
    let tuned = Breakdown::from_counts(&window(1000, 0.008), None);
    let inline = Breakdown::from_counts(&window(1000, 0.020), Some(Counts::of(FIXTURE, &[])));
    let t = table(&[
        (Row::Linux, "Linux", &linux),
        (Row::Inline, "corestack inline", &inline),
    ]);
    assert!(t.contains("/Linux") && !t.contains("/tuned"), "{t}");
    let line = t
        .lines()
        .find(|l| l.starts_with("corestack inline"))
        .unwrap();
    assert!(line.trim_end().ends_with("2.00"), "{line}");
    let t = table(&[
        (Row::Linux, "Linux", &linux),
        (Row::LinuxTuned, "Linux tuned", &tuned),
        (Row::Inline, "corestack inline", &inline),
    ]);
    let line = t
        .lines()
        .find(|l| l.starts_with("corestack inline"))
        .unwrap();
    assert!(line.trim_end().ends_with("2.00   2.50"), "{line}");
    let line = t.lines().find(|l| l.starts_with("Linux tuned")).unwrap();
    assert!(line.contains(" - "), "no split without samples: {line}");
    assert!(legend().contains("k wait"));
}

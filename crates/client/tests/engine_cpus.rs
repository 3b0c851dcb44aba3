//! `StackBuilder::engine_cpus`: embedded mode's engine threads run on the
//! CPUs given, engine i on the i-th (cycling through the list).

use corestack::Stack;
use nic::impair::Impairments;
use nic::mem;
use std::net::Ipv4Addr;

/// The CPUs the threads of this process named `name` may run on
/// (`Cpus_allowed_list` of /proc/self/task/*/status), one entry per thread.
fn allowed_of(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if let Some(l) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            out.push(l.trim().to_string());
        }
    }
    out
}

#[test]
fn engine_threads_run_on_the_cpus_given() {
    let (qa, _qb) = mem::multi_pair(
        Impairments::none(),
        Impairments::none(),
        1,
        2,
        1,
        mem::Steer::RandomPerFrame,
        mem::Steer::RandomPerFrame,
    );
    // CPU 0 exists everywhere; the list cycles, so both engines take it.
    let s = Stack::builder()
        .mem_ports(qa)
        .ip(Ipv4Addr::new(10, 0, 0, 1), 24)
        .engine_cpus(vec![0])
        .start()
        .expect("the stack");
    assert_eq!(s.engines(), 2);
    // Thread names are cut at 15 bytes: "corestack-engine-0" reads "corestack-engin".
    // A thread names (and pins) itself as it starts: wait for both, 2 s at most.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut e0 = allowed_of("corestack-engin");
    while (e0.len() < 2 || e0.iter().any(|a| a != "0")) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        e0 = allowed_of("corestack-engin");
    }
    assert_eq!(e0.len(), 2, "two engine threads: {e0:?}");
    assert!(
        e0.iter().all(|a| a == "0"),
        "engine threads allowed on {e0:?}"
    );
    assert_eq!(corestack::parse_cpu_list("3,1-2").unwrap(), [3, 1, 2]);
}

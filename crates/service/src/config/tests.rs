//! Tests of the configuration: parsing, overrides, validation and its messages.

use super::net::mask;
use super::*;

/// The error and its sources on one line, as `corestack run` prints it.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s = format!("{s}: {cause}");
        source = cause.source();
    }
    s
}

const EXAMPLE: &str = r#"
iface = "veth1"            # required unless given on the command line
ip = "10.0.0.2/24"         # ADDR/PREFIX, required likewise
gateway = "10.0.0.1"       # optional
driver = "af_xdp"          # af_xdp | tap
cores = 1                  # engines (1..=64: more is a clear error)
cpus = "2-3,6"             # CPUs for the engine threads, as taskset -c writes them
socket = "/run/corestack/ctl.sock"
ring_bytes = 262144        # per-connection ring size at the start, power of two, 4 KiB..16 MiB
ring_max_bytes = 4194304   # the most a ring grows to
max_sockets_per_app = 1024
max_apps = 256
congestion = "cubic"       # newreno | cubic | dctcp | bbr
[polling]
policy = "adaptive"        # busy | adaptive | interrupt
idle_us = 50               # adaptive: idle time before sleeping
[ports]
privileged_uids = [1000]   # may bind ports < 1024 besides root
privileged_gids = []
"#;

/// A minimal valid configuration.
fn base() -> Config {
    Config {
        iface: Some("veth1".into()),
        ip: vec!["10.0.0.2/24".into()],
        ..Config::default()
    }
}

/// `base()` changed by `f`, validated; panics with the error where it is refused.
fn validated(f: impl FnOnce(&mut Config)) -> Validated {
    let mut c = base();
    f(&mut c);
    c.validate()
        .unwrap_or_else(|e| panic!("should be accepted: {}", one_line(&e)))
}

/// The validation error of `base()` changed by `f`, as one line.
fn error_of(f: impl FnOnce(&mut Config)) -> String {
    let mut c = base();
    f(&mut c);
    let e = c.validate().expect_err("should be refused");
    let s = one_line(&e);
    assert!(!s.contains('\n'), "not one line: {s}");
    s
}

#[test]
fn empty_file_is_the_defaults() {
    let c = Config::from_toml_str("").unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.iface, None);
    assert!(c.ip.is_empty());
    assert!(c.gateway.is_empty());
    assert_eq!(c.driver, Driver::AfXdp);
    assert_eq!(c.cores, 1);
    assert_eq!(c.socket, Path::new("/run/corestack/ctl.sock"));
    assert_eq!(c.ring_bytes, 262144);
    assert_eq!(c.max_sockets_per_app, 1024);
    assert_eq!(c.max_apps, 256);
    assert_eq!(c.congestion, CcKind::system_default());
    assert_eq!(c.polling.policy, PollPolicy::Adaptive);
    assert_eq!(c.polling.idle_us, 50);
    assert!(c.ports.privileged_uids.is_empty());
    assert!(c.ports.privileged_gids.is_empty());
}

#[test]
fn defaults_with_iface_and_ip_validate() {
    let v = base().validate().unwrap();
    assert_eq!(v.iface, "veth1");
    assert_eq!(v.ip, Ipv4Addr::new(10, 0, 0, 2));
    assert_eq!(v.prefix, 24);
    assert_eq!(v.gateway, None);
    assert_eq!(
        v.policy,
        Policy::Adaptive {
            idle: Duration::from_micros(50)
        }
    );
}

#[test]
fn example_file_parses_and_validates() {
    let v = Config::from_toml_str(EXAMPLE).unwrap().validate().unwrap();
    assert_eq!(
        v,
        Validated {
            iface: "veth1".into(),
            ip: Ipv4Addr::new(10, 0, 0, 2),
            prefix: 24,
            gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ip6: None,
            gateway6: None,
            driver: Driver::AfXdp,
            cores: 1,
            cpus: vec![2, 3, 6],
            socket: PathBuf::from("/run/corestack/ctl.sock"),
            ring_bytes: 262144,
            ring_max_bytes: 4 << 20,
            buffer_growth_limit: 256 << 20,
            max_sockets_per_app: 1024,
            max_apps: 256,
            congestion: CcKind::Cubic,
            policy: Policy::Adaptive {
                idle: Duration::from_micros(50)
            },
            privileged_uids: vec![1000],
            privileged_gids: vec![],
        }
    );
}

#[test]
fn every_enum_value_parses() {
    let c = Config::from_toml_str(
        "driver = \"tap\"\ncongestion = \"dctcp\"\n[polling]\npolicy = \"busy\"\n",
    )
    .unwrap();
    assert_eq!(
        (c.driver, c.congestion, c.polling.policy),
        (Driver::Tap, CcKind::Dctcp, PollPolicy::Busy)
    );
    let c = Config::from_toml_str("congestion = \"newreno\"\n[polling]\npolicy = \"interrupt\"\n")
        .unwrap();
    assert_eq!(c.congestion, CcKind::NewReno);
    assert_eq!(c.polling.policy, PollPolicy::Interrupt);
    let mut c = base();
    c.polling.policy = PollPolicy::Interrupt;
    assert_eq!(c.validate().unwrap().policy, Policy::Interrupt);
    c.polling.policy = PollPolicy::Busy;
    c.polling.idle_us = u64::MAX; // ignored when not adaptive
    assert_eq!(c.validate().unwrap().policy, Policy::Busy);
}

#[test]
fn overrides_replace_only_what_they_give() {
    let mut c = Config::from_toml_str(EXAMPLE).unwrap();
    let before = c.clone();
    c.apply(&Overrides::default());
    assert_eq!(c, before);

    c.apply(&Overrides {
        iface: Some("eth9".into()),
        ip: vec!["192.168.7.5/16".into()],
        gateway: vec!["192.168.0.1".into()],
        driver: Some(Driver::Tap),
        cores: Some(1),
        cpus: Some("5".into()),
        socket: Some("/tmp/cs.sock".into()),
        policy: Some(PollPolicy::Busy),
        idle_us: Some(7),
    });
    assert_eq!(c.iface.as_deref(), Some("eth9"));
    assert_eq!(c.ip, ["192.168.7.5/16"]);
    assert_eq!(c.gateway, ["192.168.0.1"]);
    assert_eq!(c.driver, Driver::Tap);
    assert_eq!(c.socket, Path::new("/tmp/cs.sock"));
    assert_eq!(c.polling.policy, PollPolicy::Busy);
    assert_eq!(c.polling.idle_us, 7);
    // Untouched by the command line.
    assert_eq!(c.ring_bytes, before.ring_bytes);
    assert_eq!(c.ports, before.ports);
    assert_eq!(c.congestion, before.congestion);

    let v = c.validate().unwrap();
    assert_eq!((v.ip, v.prefix), (Ipv4Addr::new(192, 168, 7, 5), 16));
    assert_eq!(v.policy, Policy::Busy);
    assert_eq!(v.cpus, [5]);
}

#[test]
fn overrides_fill_a_file_without_iface_and_ip() {
    let mut c = Config::from_toml_str("max_apps = 3").unwrap();
    assert!(c.validate().is_err());
    c.apply(&Overrides {
        iface: Some("veth1".into()),
        ip: vec!["10.0.0.2/24".into()],
        idle_us: Some(200),
        ..Overrides::default()
    });
    let v = c.validate().unwrap();
    assert_eq!(v.max_apps, 3);
    assert_eq!(
        v.policy,
        Policy::Adaptive {
            idle: Duration::from_micros(200)
        }
    );
}

#[test]
fn unknown_keys_are_errors_with_their_line() {
    let e = Config::from_toml_str("iface = \"veth1\"\nifcae = \"x\"\n").unwrap_err();
    let s = one_line(&e);
    assert!(s.starts_with("config line 2 (`ifcae = \"x\"`): "), "{s}");
    assert!(s.contains("ifcae"), "{s}");
    assert!(!s.contains('\n'), "{s}");

    let e = Config::from_toml_str("[polling]\npolicy = \"busy\"\nidle = 5\n").unwrap_err();
    let s = one_line(&e);
    assert!(s.starts_with("config line 3 (`idle = 5`): "), "{s}");

    let e = Config::from_toml_str("[ports]\nprivileged_users = [1]\n").unwrap_err();
    assert!(one_line(&e).contains("privileged_users"));

    let e = Config::from_toml_str("[tuning]\nx = 1\n").unwrap_err();
    assert!(one_line(&e).contains("tuning"));
}

#[test]
fn wrong_types_and_values_are_errors_with_their_line() {
    for (text, line, word) in [
        ("cores = \"one\"\n", 1, "cores"),
        ("\n\nring_bytes = -4096\n", 3, "4096"),
        ("driver = \"dpdk\"\n", 1, "dpdk"),
        ("congestion = \"vegas\"\n", 1, "vegas"),
        ("[polling]\npolicy = \"spin\"\n", 2, "spin"),
        ("[ports]\nprivileged_uids = 1000\n", 2, "sequence"),
        ("iface = veth1\n", 1, ""),
    ] {
        let s = one_line(&Config::from_toml_str(text).unwrap_err());
        assert!(
            s.starts_with(&format!("config line {line} (`")),
            "{text:?}: {s}"
        );
        assert!(s.contains(word), "{text:?}: {s}");
        assert!(!s.contains('\n'), "{text:?}: {s}");
    }
}

#[test]
fn load_names_the_file_and_line() {
    let dir = std::env::temp_dir().join(format!("corestack-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, EXAMPLE).unwrap();
    assert_eq!(
        Config::load(&good).unwrap(),
        Config::from_toml_str(EXAMPLE).unwrap()
    );

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "iface = \"veth1\"\n\ncores = 1\ncores = 2\n").unwrap();
    let s = one_line(&Config::load(&bad).unwrap_err());
    assert!(
        s.starts_with(&format!("{} line 4 (`cores = 2`): ", bad.display())),
        "{s}"
    );

    let missing = dir.join("missing.toml");
    let s = one_line(&Config::load(&missing).unwrap_err());
    assert!(
        s.starts_with(&format!("reading config {}: ", missing.display())),
        "{s}"
    );
    assert!(!s.contains('\n'));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Asserts that the setting `set` stores is refused when absent or empty, the error asking for
/// `flag`.
fn missing_refused(set: fn(&mut Config, Option<String>), flag: &str) {
    for v in [None, Some(String::new())] {
        let s = error_of(|c| set(c, v));
        assert!(s.contains(&format!("pass {flag}")), "{s}");
    }
}

#[test]
fn missing_iface_is_refused() {
    missing_refused(|c, v| c.iface = v, "--iface");
}

#[test]
fn bad_iface_names_are_refused() {
    for (iface, why) in [
        ("a-very-long-name0", "at most 15 bytes"),
        ("veth 1", "not an interface name"),
        ("a/b", "not an interface name"),
        ("..", "not an interface name"),
    ] {
        let s = error_of(|c| c.iface = Some(iface.into()));
        assert!(s.contains(why), "{iface}: {s}");
    }
}

#[test]
fn missing_ip_is_refused() {
    missing_refused(|c, v| c.ip = v.into_iter().collect(), "--ip");
}

#[test]
fn ip_without_prefix_is_refused_with_an_example() {
    let s = error_of(|c| c.ip = vec!["10.0.0.2".into()]);
    assert!(
        s.contains("no prefix length") && s.contains("\"10.0.0.2/24\""),
        "{s}"
    );
}

/// Asserts that `--ip IP` is refused with a one-line error saying `why`.
fn ip_refused(ip: &str, why: &str) {
    let s = error_of(|c| c.ip = vec![ip.into()]);
    assert!(s.contains(why), "{ip}: {s}");
}

#[test]
fn malformed_ip_is_refused() {
    for ip in ["10.0.0.256/24", "10.0.0/24", "fd00::g/64"] {
        ip_refused(ip, "not an IPv4 or IPv6 address");
    }
    for ip in ["10.0.0.2/33", "10.0.0.2/", "10.0.0.2/x", "10.0.0.2/-1"] {
        ip_refused(ip, "not a prefix length");
    }
}

#[test]
fn non_host_ip_is_refused() {
    for ip in [
        "0.0.0.0/24",
        "255.255.255.255/24",
        "224.0.0.1/24",
        "127.0.0.1/8",
    ] {
        ip_refused(ip, "not usable as the stack's address");
    }
    ip_refused("10.0.0.0/24", "network address");
    ip_refused("10.0.0.255/24", "broadcast address");
    // /31 and /32 have no network or broadcast address.
    let mut c = base();
    c.ip = vec!["10.0.0.0/31".into()];
    assert_eq!(c.validate().unwrap().prefix, 31);
    c.ip = vec!["10.0.0.7/32".into()];
    assert_eq!(c.validate().unwrap().prefix, 32);
}

#[test]
fn bad_gateways_are_refused() {
    for (gateway, why) in [
        ("router", "not a unicast IPv4 or IPv6 address"),
        ("10.0.0.2", "own address"),
        ("10.0.1.1", "not in the stack's subnet 10.0.0.0/24"),
    ] {
        let s = error_of(|c| c.gateway = vec![gateway.into()]);
        assert!(s.contains(why), "{gateway}: {s}");
    }
    let v = validated(|c| {
        c.ip = vec!["10.0.0.2/16".into()];
        c.gateway = vec!["10.0.1.1".into()];
    });
    assert_eq!(v.gateway, Some(Ipv4Addr::new(10, 0, 1, 1)));
}

#[test]
fn cores_from_one_to_the_limit_are_taken_and_others_refused() {
    assert!(error_of(|c| c.cores = 0).contains("at least one core"));
    for n in [1, 2, 4, CORES_SUPPORTED] {
        assert_eq!(validated(|c| c.cores = n).cores, n, "cores = {n}");
    }
    let s = error_of(|c| c.cores = CORES_SUPPORTED + 1);
    assert!(
        s.contains("at most 64 engines") && s.contains("set cores = 1..=64"),
        "{s}"
    );
}

#[test]
fn cpus_are_a_taskset_list_and_others_are_refused() {
    let v = validated(|c| c.cpus = Some("0-2, 7,1".into()));
    assert_eq!(v.cpus, [0, 1, 2, 7]);
    assert_eq!(base().validate().unwrap().cpus, Vec::<usize>::new());
    for bad in ["3-1", "x", "", "1-", "4096"] {
        let s = error_of(|c| c.cpus = Some(bad.into()));
        assert!(
            s.contains(&format!("cpus = \"{bad}\"")) && s.contains("taskset -c"),
            "{s}"
        );
    }
}

#[test]
fn bad_socket_paths_are_refused() {
    assert!(error_of(|c| c.socket = PathBuf::new()).contains("socket is empty"));
    let long = format!("/tmp/{}", "s".repeat(103));
    assert_eq!(long.len(), 108);
    assert!(error_of(|c| c.socket = long.into()).contains("at most 107"));
    validated(|c| c.socket = format!("/tmp/{}", "s".repeat(102)).into());
}

#[test]
fn ring_bytes_must_be_a_power_of_two_in_range() {
    for bad in [0, 1, 2048, 4095, 5000, 262143, 32 << 20, u32::MAX] {
        let s = error_of(|c| c.ring_bytes = bad);
        assert!(s.contains("must be a power of two"), "{bad}: {s}");
    }
    for good in [4096, 1 << 20, 16 << 20] {
        assert_eq!(validated(|c| c.ring_bytes = good).ring_bytes, good);
    }
}

#[test]
fn ring_max_bytes_is_a_power_of_two_and_at_least_ring_bytes() {
    for bad in [0, 4095, 5 << 20, 32 << 20] {
        let s = error_of(|c| c.ring_max_bytes = bad);
        assert!(s.contains("ring_max_bytes"), "{bad}: {s}");
    }
    let mut c = base();
    c.ring_bytes = 1 << 20;
    c.ring_max_bytes = 64 << 10;
    assert_eq!(c.validate().unwrap().ring_max_bytes, 1 << 20, "fixed rings");
    c.ring_max_bytes = 16 << 20;
    assert_eq!(c.validate().unwrap().ring_max_bytes, 16 << 20);
}

#[test]
fn socket_and_app_limits_must_be_in_range() {
    assert!(error_of(|c| c.max_sockets_per_app = 0).contains("max_sockets_per_app = 0"));
    assert!(
        error_of(|c| c.max_sockets_per_app = MAX_SOCKETS_PER_APP_LIMIT + 1)
            .contains("must be 1 to 65536")
    );
    assert!(error_of(|c| c.max_apps = 0).contains("max_apps = 0"));
    assert!(error_of(|c| c.max_apps = MAX_APPS_LIMIT + 1).contains("must be 1 to 4096"));
}

#[test]
fn adaptive_idle_time_is_bounded() {
    let s = error_of(|c| c.polling.idle_us = IDLE_US_MAX + 1);
    assert!(
        s.contains("polling.idle_us") && s.contains("at most 1000000"),
        "{s}"
    );
    let mut c = base();
    c.polling.idle_us = 0;
    assert_eq!(
        c.validate().unwrap().policy,
        Policy::Adaptive {
            idle: Duration::ZERO
        }
    );
}

#[test]
fn privileged_ports_root_listed_uid_or_listed_group() {
    let v = validated(|c| {
        c.ports.privileged_uids = vec![1000];
        c.ports.privileged_gids = vec![27];
    });
    assert!(v.may_bind_privileged(0, &[]));
    assert!(v.may_bind_privileged(1000, &[]));
    assert!(v.may_bind_privileged(1001, &[100, 27]));
    assert!(!v.may_bind_privileged(1001, &[100, 1000]));
    assert!(!v.may_bind_privileged(65534, &[]));
    // Nobody but root by default.
    let v = base().validate().unwrap();
    assert!(v.may_bind_privileged(0, &[0]));
    assert!(!v.may_bind_privileged(1000, &[1000]));
}

#[test]
fn long_lines_are_shortened_in_errors() {
    let text = format!("iface = \"{}\"\nbogus = 1\n", "x".repeat(10));
    let long = format!("bogus = \"{}\"\n", "é".repeat(100));
    let s = one_line(&Config::from_toml_str(&long).unwrap_err());
    assert!(s.contains(&format!("{}...`", "é".repeat(49))), "{s}");
    let s = one_line(&Config::from_toml_str(&text).unwrap_err());
    assert!(s.starts_with("config line 2 (`bogus = 1`)"), "{s}");
}

#[test]
fn mask_of_every_edge_prefix() {
    assert_eq!(mask(0), 0);
    assert_eq!(mask(1), 0x8000_0000);
    assert_eq!(mask(24), 0xffff_ff00);
    assert_eq!(mask(32), u32::MAX);
}

#[test]
fn old_single_address_files_and_new_lists_both_parse() {
    let old = Config::from_toml_str("ip = \"10.0.0.2/24\"\ngateway = \"10.0.0.1\"\n").unwrap();
    assert_eq!(
        (old.ip.as_slice(), old.gateway.as_slice()),
        (
            &["10.0.0.2/24".to_string()][..],
            &["10.0.0.1".to_string()][..]
        )
    );
    let new = Config::from_toml_str(
        "iface = \"veth1\"\nip = [\"10.0.0.2/24\", \"fd00:77::2/64\"]\ngateway = [\"10.0.0.1\", \"fe80::1\"]\n",
    )
    .unwrap();
    let v = new.validate().unwrap();
    assert_eq!((v.ip, v.prefix), (Ipv4Addr::new(10, 0, 0, 2), 24));
    assert_eq!(v.gateway, Some(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(v.ip6, Some(("fd00:77::2".parse().unwrap(), 64)));
    assert_eq!(v.gateway6, Some("fe80::1".parse().unwrap()));
    // The engine gets its IPv6 settings (the link-local address from the MAC).
    let e = v.engine_config();
    let v6 = e.ipv6.expect("IPv6 configured");
    assert_eq!(v6.global, v.ip6);
    assert_eq!(v6.gateway, v.gateway6);
    assert_eq!(v6.link_local, None);
    assert!(base().validate().unwrap().engine_config().ipv6.is_none());
    let s = one_line(&Config::from_toml_str("ip = 5\n").unwrap_err());
    assert!(
        s.starts_with("config line 1 (`ip = 5`)") && s.contains("list"),
        "{s}"
    );
}

#[test]
fn ipv6_addresses_and_gateways_are_checked() {
    // The order of the list does not matter; the command line replaces the file's list.
    let mut c = base();
    c.ip = vec!["fd00:1::2/64".into(), "10.0.0.2/24".into()];
    c.gateway = vec!["fd00:1::1".into()];
    let v = c.validate().unwrap();
    assert_eq!(v.ip6, Some(("fd00:1::2".parse().unwrap(), 64)));
    assert_eq!(v.gateway6, Some("fd00:1::1".parse().unwrap()));
    c.apply(&Overrides {
        ip: vec!["10.9.0.2/16".into()],
        ..Overrides::default()
    });
    assert_eq!(c.ip, ["10.9.0.2/16"]);
    for (ips, why) in [
        (&["fd00::2/64"][..], "needs an IPv4 address too"),
        (&["10.0.0.2/24", "10.0.0.3/24"], "at most one ip per family"),
        (
            &["10.0.0.2/24", "fd00::2/64", "fd00::3/64"],
            "at most one ip per family",
        ),
        (&["10.0.0.2/24", "fd00::2/129"], "not a prefix length"),
        (&["10.0.0.2/24", "fd00::2"], "no prefix length"),
        (
            &["10.0.0.2/24", "fe80::2/64"],
            "not usable as the stack's IPv6 address",
        ),
        (
            &["10.0.0.2/24", "::1/128"],
            "not usable as the stack's IPv6 address",
        ),
        (
            &["10.0.0.2/24", "ff02::1/64"],
            "not usable as the stack's IPv6 address",
        ),
        (
            &["10.0.0.2/24", "::ffff:10.0.0.2/96"],
            "not usable as the stack's IPv6 address",
        ),
    ] {
        let s = error_of(|c| c.ip = ips.iter().map(|s| s.to_string()).collect());
        assert!(s.contains(why), "{ips:?}: {s}");
    }
    let dual = |c: &mut Config| c.ip = vec!["10.0.0.2/24".into(), "fd00:1::2/64".into()];
    for (gws, why) in [
        (&["fd00:1::1"][..], ""),
        (&["fe80::1"], ""),
        (&["fd00:2::1"], "not in the stack's subnet fd00:1::/64"),
        (&["fd00:1::2"], "own address"),
        (&["ff02::2"], "not a unicast"),
        (&["fe80::1", "fe80::2"], "at most one gateway per family"),
        (&["10.0.0.1", "10.0.0.3"], "at most one gateway per family"),
    ] {
        let mut c = base();
        dual(&mut c);
        c.gateway = gws.iter().map(|s| s.to_string()).collect();
        match (c.validate(), why) {
            (Ok(_), "") => {}
            (Err(e), w) if !w.is_empty() => assert!(one_line(&e).contains(w), "{gws:?}: {e}"),
            (r, _) => panic!("{gws:?}: {r:?}"),
        }
    }
    let s = error_of(|c| c.gateway = vec!["fe80::1".into()]);
    assert!(s.contains("no IPv6 address"), "{s}");
}

#[test]
fn file_reads_into_the_stack_config_the_other_readers_make() {
    let c = Config::from_toml_str(
        "iface = \"veth1\"\nip = [\"10.0.0.2/24\", \"fd00:77::2/64\"]\n\
         gateway = \"10.0.0.1\"\ndriver = \"tap\"\ncores = 1\ncpus = \"3\"\n\
         ring_bytes = 65536\ncongestion = \"dctcp\"\n[polling]\npolicy = \"adaptive\"\nidle_us = 20\n",
    )
    .unwrap();
    let v = c.validate().unwrap();
    assert_eq!(
        v.stack_config(),
        corestack::StackConfig {
            iface: "veth1".into(),
            driver: Driver::Tap,
            ip: Ipv4Addr::new(10, 0, 0, 2),
            prefix: 24,
            gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ip6: Some(("fd00:77::2".parse().unwrap(), 64)),
            engine_cpus: vec![3],
            idle_us: 20,
            ring_bytes: Some(65536),
            ring_max_bytes: Some(8 << 20),
            congestion: Some(CcKind::Dctcp),
            ..corestack::StackConfig::default()
        }
    );
    // The engine's settings come from it, with the daemon's own limits.
    let e = v.engine_config();
    assert_eq!((e.ip, e.prefix_len, e.ring_bytes), (v.ip, 24, 65536));
    assert!(e.tcp.ecn, "DCTCP turns ECN on");
    assert_eq!(e.max_sockets, 256 * 1024);
    assert_eq!(e.buffer_growth_limit, 256 << 20);
}

#!/usr/bin/env bash
# Prepares this machine for `make demo` and `make test` (Debian/Ubuntu, as root). Idempotent:
# installs only the packages that are missing, adds rustfmt/clippy only if absent, mounts bpffs
# only if it is not mounted.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
    echo "error: corestack's demo and tests create network namespaces and attach XDP programs: run as root (sudo make ...)" >&2
    exit 1
fi

# memcached, iperf3, sockperf, curl (and python3): real programs the shim tests run on corestack;
# procps: sysctl, which the benchmarks and scale tests set in their namespaces; liburing-dev: the
# shim's io_uring test links liburing (shared and static).
packages=(iproute2 iputils-ping ethtool netcat-openbsd tcpdump pkg-config libxdp-dev libbpf-dev gcc libc6-dev procps
    memcached iperf3 sockperf curl python3 liburing-dev)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

# Node.js: a shim test runs a Node http server (installed from Debian only when missing: the
# machine image usually has its own).
if ! command -v node >/dev/null; then
    echo "setup: installing nodejs"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs
fi

# PostgreSQL (pgbench), nginx and a JDK: shim tests run the postmaster (which forks a backend per
# connection) under pgbench, and nginx with Debian's stock configuration, in service mode.
# Installed only when missing, without starting their services (the tests start their own).
servers=()
if ! command -v pgbench >/dev/null || ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
    servers+=(postgresql)
fi
[[ -x /usr/sbin/nginx && -f /etc/nginx/nginx.conf ]] || servers+=(nginx)
# A JVM server (the JDK's com.sun.net.httpserver, launched as a single source file, which
# needs the compiler module) under plain `corestack exec`.
java --list-modules 2>/dev/null | grep -q '^jdk.compiler' || servers+=(openjdk-17-jdk-headless)
if ((${#servers[@]})); then
    echo "setup: installing ${servers[*]} (their services are not started)"
    apt-get update -qq
    policy=/usr/sbin/policy-rc.d
    [[ -e $policy ]] || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && trap 'rm -f "$policy"' EXIT; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${servers[@]}"
fi

if ! command -v cargo >/dev/null && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    source "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "error: cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    echo "setup: adding rustfmt and clippy"
    rustup component add rustfmt clippy
fi

# The hostile-input tests (crates/cli/tests/hostile.rs) craft frames with scapy.
if ! python3 -c 'import scapy' >/dev/null 2>&1; then
    echo "setup: installing scapy (pip)"
    python3 -m pip install --quiet scapy \
        || python3 -m pip install --quiet --break-system-packages scapy \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-scapy; }
fi

# Fuzzing (make test runs the corpora and a short bounded run): nightly + cargo-fuzz,
# only with --fuzz (the demo does not need them).
if [[ "${1:-}" == "--fuzz" ]] && ! rustup toolchain list | grep -q '^nightly'; then
    echo "setup: installing the nightly toolchain (for cargo-fuzz)"
    rustup toolchain install nightly --profile minimal
fi
if [[ "${1:-}" == "--fuzz" ]] && ! cargo fuzz --version >/dev/null 2>&1; then
    echo "setup: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

if ! mountpoint -q /sys/fs/bpf; then
    echo "setup: mounting bpffs at /sys/fs/bpf"
    mkdir -p /sys/fs/bpf
    mount -t bpf bpf /sys/fs/bpf
fi

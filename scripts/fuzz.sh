#!/usr/bin/env bash
# Fuzzing of corestack with cargo-fuzz (libFuzzer); needs the nightly
# toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`).
#
#   scripts/fuzz.sh regress        every target over its corpus only (CI)
#   scripts/fuzz.sh run SECS       a bounded fuzz run of SECS seconds per target;
#                                  new inputs go to a scratch corpus, the
#                                  repository corpus is only read
#   scripts/fuzz.sh cmin           minimize every corpus in place (cargo fuzz cmin)
#   scripts/fuzz.sh known          replay fuzz/artifacts-known/<target>/* (open
#                                  crashes reported but not fixed yet); fails
#                                  while any still crashes
#
# Optional: TARGETS="tcp engine_frames" restricts the targets;
# SANITIZER=address|none for `run` (default: address for the wire parsers,
# none for engine_frames, about 6x faster there; the crates it runs are safe
# Rust apart from appif's rings, which regress still checks under ASan);
# CARGO_TARGET_DIR is honoured (default fuzz/target).
# A crash leaves its input in fuzz/artifacts/<target>/ and fails the script.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../fuzz"

all_targets() {
    sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^corestack-fuzz$'
}
targets=${TARGETS:-$(all_targets)}
fuzz=(cargo +nightly fuzz)

usage() {
    sed -n '2,20p' "$self" | sed 's/^# \{0,1\}//'
    exit 2
}

case "${1:-}" in
regress)
    "${fuzz[@]}" build
    for t in $targets; do
        echo "== regress $t ($(ls "corpus/$t" | wc -l) inputs)"
        "${fuzz[@]}" run "$t" "corpus/$t" -- -runs=0
    done
    ;;
run)
    secs=${2:?usage: scripts/fuzz.sh run SECS}
    scratch=$(mktemp -d /tmp/corestack-fuzz.XXXXXX)
    trap 'rm -rf "$scratch"' EXIT
    for t in $targets; do
        echo "== run $t for ${secs}s"
        mkdir -p "$scratch/$t"
        san=${SANITIZER:-$([ "$t" = engine_frames ] && echo none || echo address)}
        "${fuzz[@]}" run -s "$san" "$t" "$scratch/$t" "corpus/$t" -- \
            -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
    done
    ;;
cmin)
    for t in $targets; do
        echo "== cmin $t"
        "${fuzz[@]}" cmin "$t" "corpus/$t"
    done
    ;;
known)
    "${fuzz[@]}" build
    status=0
    for t in $targets; do
        [ -d "artifacts-known/$t" ] || continue
        for f in "artifacts-known/$t"/*; do
            [ -f "$f" ] || continue
            echo "== known $t $f"
            "${fuzz[@]}" run "$t" "$f" -- -runs=1 || status=1
        done
    done
    exit $status
    ;;
*)
    usage
    ;;
esac

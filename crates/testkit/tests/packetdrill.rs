//! The conformance suite (issue 35): every packetdrill script under `packetdrill/`, each naming
//! the RFC section it checks on its first line, run against the engine on virtual time
//! (`testkit::packetdrill`). Prints how many scripts pass per RFC, and how many of them are
//! marked as scripts the Linux kernel also passes; fails naming every script that failed.

use std::collections::BTreeMap;
use std::path::Path;

use engine::EngineConfig;
use testkit::packetdrill;

#[test]
fn every_script_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("packetdrill");
    let mut paths: Vec<_> = walk(&dir);
    paths.sort();
    assert!(!paths.is_empty(), "no scripts under {}", dir.display());
    let mut by_rfc: BTreeMap<u32, (usize, usize, usize)> = BTreeMap::new();
    let mut failed = Vec::new();
    for p in &paths {
        let text = std::fs::read_to_string(p).expect("a script");
        let name = p.strip_prefix(&dir).unwrap_or(p).display().to_string();
        match packetdrill::run(&text, EngineConfig::default()) {
            Err(e) => failed.push(format!("{name}: does not parse: {e}")),
            Ok((h, outcome)) => {
                let e = by_rfc.entry(h.rfc).or_default();
                e.0 += 1;
                e.2 += usize::from(h.linux);
                match outcome {
                    Ok(()) => e.1 += 1,
                    Err(why) => failed.push(format!("{name}: {why}")),
                }
            }
        }
    }
    println!("packetdrill scripts by RFC: passed/run (marked as passing on Linux too)");
    for (rfc, (run, passed, linux)) in &by_rfc {
        println!("  RFC {rfc:<5} {passed:>3}/{run:<3} ({linux} linux)");
    }
    let total: usize = by_rfc.values().map(|v| v.0).sum();
    println!("  all       {}/{total}", total - failed.len());
    assert!(
        failed.is_empty(),
        "{} of {total} scripts failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)
        .expect("the scripts' directory")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "pkt") {
            out.push(p);
        }
    }
    out
}

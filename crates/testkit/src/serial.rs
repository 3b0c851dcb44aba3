//! The suite lock of the namespace tests, shared by the CLI's tests (`common::start`) and the C
//! API's: each test spins a core for its engine and the machine has two, so they run one at a
//! time, and they need root.

use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the suite-wide lock and checks privileges: call first in every test. Panics without
/// root (the tests fail, they never skip).
pub fn start() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = netns::check_privileges() {
        panic!("these tests create network namespaces and need root: run `sudo make test` ({e})");
    }
    guard
}

//! One timing test at a time within a test binary: each test that asserts measured wall-clock
//! time takes `serial::one_at_a_time()` first and holds it to its end. `cargo test` runs test
//! binaries one after another, so with this guard such a test has the machine to itself there
//! as under nextest's `timing` test group (CI). The guard holds no lock across `.await` (a
//! flag and a condition variable), and a failing test releases it as it unwinds.
#![allow(dead_code)]

use std::sync::{Condvar, Mutex};

static BUSY: Mutex<bool> = Mutex::new(false);
static FREED: Condvar = Condvar::new();

/// Held for the length of one timing test.
pub struct Serial(());

/// Waits until no other timing test of this binary runs, then runs alone until dropped.
pub fn one_at_a_time() -> Serial {
    let mut busy = BUSY.lock().unwrap_or_else(|e| e.into_inner());
    while *busy {
        busy = FREED.wait(busy).unwrap_or_else(|e| e.into_inner());
    }
    *busy = true;
    Serial(())
}

impl Drop for Serial {
    fn drop(&mut self) {
        *BUSY.lock().unwrap_or_else(|e| e.into_inner()) = false;
        FREED.notify_one();
    }
}

//! Timing tests within a test binary run without other timing tests beside them.
//!
//! A test that asserts measured wall-clock time takes `serial::one_at_a_time()` first and
//! holds it to its end: it runs alone. A test whose assertions hold with wide margins under
//! the load of other such tests takes `serial::beside_each_other()`: such tests run beside
//! each other, never beside a test that runs alone. Clock readings are of this kind: they
//! mostly wait for their servers' second boundaries, and a probe that another reading delays
//! widens the stated uncertainty but never moves it off the truth. `cargo test` runs test
//! binaries one after another, so these tests never compete with the other binaries' tests
//! either. The guard holds no lock across `.await` (a count and a condition variable), and a
//! failing test releases it as it unwinds.
#![allow(dead_code)]

use std::sync::{Condvar, Mutex};

/// How many tests hold the machine, and how: `ALONE`, or that many tests beside each other.
static HELD: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();
const ALONE: usize = usize::MAX;

/// Held for the length of one timing test.
pub struct Serial(());

/// Waits until no other timing test of this binary runs, then runs alone until dropped.
pub fn one_at_a_time() -> Serial {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    while *held != 0 {
        held = FREED.wait(held).unwrap_or_else(|e| e.into_inner());
    }
    *held = ALONE;
    Serial(())
}

/// Waits until no test runs alone, then runs beside the other such tests until dropped.
pub fn beside_each_other() -> Serial {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    while *held == ALONE {
        held = FREED.wait(held).unwrap_or_else(|e| e.into_inner());
    }
    *held += 1;
    Serial(())
}

impl Drop for Serial {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        *held = if *held == ALONE { 0 } else { *held - 1 };
        FREED.notify_all();
    }
}

//! Scalar operands shared: `x + 1.0` records a lazy 0-d `full` of the
//! scalar; a chain of such ops would record one constant node per op, half
//! of its graph, which eval schedules, plans and drops although every
//! kernel that reads them folds equal constants into one parameter word.
//! A small per-device table keeps the last constants made, weakly, so that
//! equal scalars share one node while someone still reads it.
//!
//! A shared constant is never handed to the user (only ops read it, as an
//! input), so the fusion planner does not count the nodes outside an eval
//! that read it as holders: it stays a parameter word (`graph::fuse`).
//! While memory history is on, constants are not shared, so that each keeps
//! the op and call site that made it.

use std::sync::{Mutex, Weak};

use crate::DType;
use crate::array::ArrayInner;

/// Slots of the table: a constant lands in the slot its bits and dtype
/// hash to, replacing what was there.
const SLOTS: usize = 32;

type Slot = Option<(u64, DType, Weak<ArrayInner>)>;

/// The table (a leaf lock: nothing else is locked or called while it is
/// held, beyond counting references).
pub(crate) struct Constants {
    slots: Mutex<[Slot; SLOTS]>,
}

impl Default for Constants {
    fn default() -> Self {
        Constants {
            slots: Mutex::new(std::array::from_fn(|_| None)),
        }
    }
}

fn slot_of(bits: u64, dtype: DType) -> usize {
    let h = (bits ^ (dtype as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 59) as usize % SLOTS
}

impl Constants {
    /// The live shared constant `bits` of `dtype`, if the table has one.
    pub(crate) fn get(&self, bits: u64, dtype: DType) -> Option<std::sync::Arc<ArrayInner>> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        match &slots[slot_of(bits, dtype)] {
            Some((b, d, w)) if *b == bits && *d == dtype => w.upgrade(),
            _ => None,
        }
    }

    /// Remember `array` as the shared constant `bits` of `dtype`.
    pub(crate) fn put(&self, bits: u64, dtype: DType, array: Weak<ArrayInner>) {
        let old = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots[slot_of(bits, dtype)].replace((bits, dtype, array))
        };
        drop(old);
    }
}

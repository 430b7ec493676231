//! A counting global allocator, for tests that prove a hot loop allocates nothing.
//!
//! Register it in a test binary and read the count around the stretch under test:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: stampede_engine::testing::CountingAllocator = stampede_engine::testing::CountingAllocator;
//! let before = stampede_engine::testing::allocations();
//! ```
//!
//! Counts are per thread, because the test harness runs other tests (and prints) on
//! other threads. Frees are not counted; reallocations are.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Wraps the system allocator and counts allocations on the calling thread.
pub struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: during thread teardown the slot may be gone; those are not ours.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches only a
// thread-local `Cell` and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` came from `System` through this allocator, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) on this thread so far, if `CountingAllocator` is
/// the global allocator; always 0 otherwise.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

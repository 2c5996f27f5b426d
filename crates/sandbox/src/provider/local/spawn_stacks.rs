//! The stacks a command's start runs on: two per start (one for each
//! `clone` child), with a guard page below each, kept spare by the init.

use super::errors::*;

/// Stack of each spawn child (they run only the functions below; Rust's
/// stack probes touch pages of it, so it is generous for debug builds).
pub(super) const SPAWN_STACK: usize = 256 * 1024;

/// How many unused pairs of spawn stacks an init keeps (one per command
/// started at the same time).
pub(super) const SPARE_STACKS: usize = 4;

/// Two stacks with a guard page below each, unmapped when dropped.
pub(super) struct Stacks {
    base: *mut libc::c_void,
    len: usize,
}

// SAFETY: `Stacks` owns its private mapping outright (nothing else holds
// the pointer once a start has returned), so it may move between threads.
unsafe impl Send for Stacks {}

impl Stacks {
    pub(super) fn new() -> Result<Stacks, SpawnError> {
        let page = 4096;
        let len = 2 * (page + SPAWN_STACK);
        // SAFETY: a fresh private anonymous mapping; nothing else uses it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(SpawnError::Os {
                what: "allocating the start's stacks".into(),
                errno: errno(),
            });
        }
        let stacks = Stacks { base, len };
        for i in 0..2 {
            // SAFETY: a page inside the mapping above.
            if unsafe { libc::mprotect(stacks.at(i).cast(), page, libc::PROT_NONE) } != 0 {
                return Err(SpawnError::Os {
                    what: "guarding the start's stacks".into(),
                    errno: errno(),
                });
            }
        }
        Ok(stacks)
    }

    /// The bottom (guard page) of stack `i`.
    fn at(&self, i: usize) -> *mut u8 {
        // SAFETY: within the mapping.
        unsafe { self.base.cast::<u8>().add(i * (4096 + SPAWN_STACK)) }
    }

    /// The top of stack `i` (stacks grow down; 16-byte aligned).
    pub(super) fn top(&self, i: usize) -> *mut libc::c_void {
        // SAFETY: one past the end of stack `i`, still within the mapping
        // or its end.
        unsafe { self.at(i).add(4096 + SPAWN_STACK).cast() }
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no child uses it any more.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

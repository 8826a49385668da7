//! The binary's allocator: mimalloc, without transparent huge pages, and
//! purging freed pages at once.
//!
//! Why not glibc's malloc: memory the proxy frees must go back to the OS.
//! Under glibc, 2 000 hostile connections' head buffers left ~150 MiB
//! resident after they closed (freed, but kept by fragmented per-thread
//! arenas that only give back their top). mimalloc returns freed pages; it
//! costs the request path nothing measurable (2% fewer instructions a
//! request, the paired ratio against HAProxy level: docs/reliability.md,
//! benches/README.md).
//!
//! Why the two settings (`ONLY=idle benches/proxy/run.sh`, 10 000 idle
//! keep-alive connections): with mimalloc's defaults the proxy took 67 MiB
//! (22 before the connections, 4.8 KiB each) against 44 under glibc —
//! transparent huge pages made its first arena resident 2 MiB at a time,
//! and freed pages waited a second or more (an idle proxy: until its next
//! call) before they were returned. Without huge pages (the crate's
//! `no_thp`, in the workspace manifest) and with purging immediate: 46 MiB
//! (12 before, 3.5 KiB each), and a flood's pages go back when it closes.

/// The process's allocator (see the module docs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e`
/// (include/mimalloc.h): milliseconds a freed page waits before it is
/// returned to the OS; 0 returns it at once.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the purge delay; called first thing in `main`, before any thread
/// is started.
#[allow(unsafe_code)]
pub fn configure() {
    // SAFETY: `mi_option_set` takes an option id and a value by value and
    // touches only mimalloc's option table; the id is a member of the
    // `mi_option_e` of the mimalloc this crate links (libmimalloc-sys
    // 0.1.49 builds mimalloc 3), and no other thread exists yet.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
}

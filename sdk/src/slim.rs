//! What a slim component needs from its SDK: a guest built for
//! `wasm32-unknown-unknown` imports nothing from WASI, so the host
//! instantiates it with no WASI trampolines or adapter shims — the cheapest
//! fresh instance a call can get. Without WASI there is no stderr and std's
//! allocator grows memory on its first allocation, so this module supplies
//! both: an allocator that starts in the initial memory, and a panic hook
//! that reports the panic to the host.

/// dlmalloc (0.2.14+) hands out the memory between `__heap_base` and the end
/// of the initial memory first. std's own allocator on this target always
/// starts with `memory.grow`, which costs the host an `mprotect` (and a TLB
/// shootdown) on every fresh instance.
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// Runs once per instance, from the component's constructors (`.init_array`
/// is what `__wasm_call_ctors` walks before the first export runs).
#[used]
#[unsafe(link_section = ".init_array")]
static INSTALL_PANIC_HOOK: extern "C" fn() = install_panic_hook;

extern "C" fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = info.payload_as_str().unwrap_or("Box<dyn Any>");
        let place = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        // The host keeps an error line that starts "panicked at" where a
        // WASI guest's stderr goes, and names the panic in the call's error.
        log_error(&format!("panicked at {place}:\n{message}"));
    }));
}

#[cfg(feature = "tool")]
fn log_error(message: &str) {
    crate::tool::hangar::plugin::host::log(
        crate::tool::hangar::plugin::host::LogLevel::Error,
        message,
    );
}

#[cfg(all(not(feature = "tool"), feature = "auth"))]
fn log_error(message: &str) {
    crate::auth::log(crate::auth::LogLevel::Error, message);
}

#[cfg(all(not(feature = "tool"), not(feature = "auth"), feature = "mapper"))]
fn log_error(message: &str) {
    crate::mapper::log(crate::mapper::LogLevel::Error, message);
}

#[cfg(not(any(feature = "tool", feature = "auth", feature = "mapper")))]
fn log_error(_message: &str) {}

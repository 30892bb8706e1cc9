//! `WriteCap`: what one call may write into its writable folder (the
//! artifacts directory), spent while it writes, so that a guest cannot
//! fill the disk before the quotas are checked after the call.
//!
//! wasmtime-wasi has no hook on file writes, so `shadow::shadow_writers` replaces
//! the four `wasi:filesystem/types` functions that put bytes in a file —
//! `[method]descriptor.write`, `write-via-stream`, `append-via-stream` and
//! `set-size` — with ones that ask the call's cap first and then hand over
//! to wasmtime-wasi's own. A stream is wrapped in [`CappedStream`], which
//! counts what goes through it. A call without a writable folder has no cap
//! and goes straight to wasmtime-wasi; stdout, stderr and HTTP bodies are
//! other streams and never pass here.
//!
//! The cap counts against live counters the store keeps (a session's bytes,
//! the whole store's), which hold the stored files and what every running
//! call has written, so calls writing at the same time share the quotas.
//! Every byte written counts (a rewrite of the same bytes counts again, a
//! deleted file gives nothing back until the call ends): a bound on what
//! the calls add to the disk, not a measure of it. Past it, a write fails with
//! `insufficient-space` (ENOSPC); past `max_file_bytes` in one file, with
//! `file-too-large` (EFBIG), and the host logs why once per call. The guest
//! sees an ordinary I/O error it can report (through wasi-libc's streams,
//! as Rust's `std::fs` writes, a bare EIO: see [`CappedStream`]), and its
//! call goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

/// What one call may still write into its writable folder: counters it
/// shares with every call writing into the same store (a session's bytes,
/// the store's), each under its quota, and the size no file may pass.
/// What the call wrote is taken off the counters when the cap is dropped.
#[derive(Debug)]
pub struct WriteCap {
    /// Live counters of bytes held or being written, and their quotas.
    ledgers: Vec<(Arc<AtomicU64>, u64)>,
    pub(super) max_file: u64,
    /// What this call has added to the ledgers.
    spent: AtomicU64,
    /// Set at the first refusal, which is logged (once per call).
    refused: AtomicBool,
}

impl WriteCap {
    /// Writes counted against each of `ledgers` (counter, quota), at most
    /// `max_file` bytes in one file.
    pub fn new(ledgers: Vec<(Arc<AtomicU64>, u64)>, max_file: u64) -> Arc<WriteCap> {
        Arc::new(WriteCap {
            ledgers,
            max_file,
            spent: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        })
    }

    /// Bytes the call may still write: the least any ledger has left.
    pub fn left(&self) -> u64 {
        self.ledgers
            .iter()
            .map(|(used, max)| max.saturating_sub(used.load(Ordering::Relaxed)))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// How many of `n` bytes, written at `end` of a file, may go: the least
    /// of `n`, what the call has left and the file's room; or the error
    /// that says why none may.
    pub(super) fn room(&self, end: u64, n: u64) -> Result<u64, ErrorCode> {
        let file_room = self.max_file.saturating_sub(end);
        let left = self.left();
        if n > 0 && file_room == 0 {
            return Err(ErrorCode::FileTooLarge);
        }
        if n > 0 && left == 0 {
            return Err(ErrorCode::InsufficientSpace);
        }
        Ok(n.min(file_room).min(left))
    }

    /// Takes exactly `n` bytes from every ledger, or none when one has
    /// fewer left.
    pub(super) fn take(&self, n: u64) -> bool {
        for (i, (used, max)) in self.ledgers.iter().enumerate() {
            let taken = used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(n).filter(|after| after <= max)
            });
            if taken.is_err() {
                for (used, _) in &self.ledgers[..i] {
                    used.fetch_sub(n, Ordering::Relaxed);
                }
                return false;
            }
        }
        self.spent.fetch_add(n, Ordering::Relaxed);
        true
    }

    /// Notes a refused write: the host log says why, once per call (the
    /// guest may see only a bare I/O error, see [`CappedStream`]).
    pub(super) fn refuse(&self, plugin: &str, code: ErrorCode) -> ErrorCode {
        if !self.refused.swap(true, Ordering::Relaxed) {
            let why = match code {
                ErrorCode::FileTooLarge => format!("a file would pass {} bytes", self.max_file),
                _ => "a session or store quota is reached".to_string(),
            };
            tracing::warn!(
                plugin,
                "artifacts: a write of plugin {plugin} refused: {why} ([artifacts] quotas)"
            );
        }
        code
    }

    pub(super) fn give_back(&self, n: u64) {
        if n > 0 {
            for (used, _) in &self.ledgers {
                used.fetch_sub(n, Ordering::Relaxed);
            }
            self.spent.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

impl Drop for WriteCap {
    fn drop(&mut self) {
        let spent = *self.spent.get_mut();
        self.give_back(spent);
    }
}

/// The error a stream reports for `code`: an I/O error the guest's
/// `filesystem-error-code` turns back into `code`.
fn stream_error(code: ErrorCode) -> StreamError {
    let errno = match code {
        ErrorCode::FileTooLarge => libc::EFBIG,
        _ => libc::ENOSPC,
    };
    StreamError::LastOperationFailed(std::io::Error::from_raw_os_error(errno).into())
}

/// An output stream into a file under the call's cap: it offers no more
/// than the cap has left, and refuses bytes past it.
///
/// Once the cap is spent, `check-write` still offers the file's own room
/// and the `write` that follows fails. Failing `check-write` itself would
/// fail the flush that ends a write that went through (wasi-libc waits for
/// a flush with `check-write`), and offering 0 would leave a blocking
/// writer waiting for room that never comes. The stream error carries the
/// error code, for `filesystem-error-code`; wasi-libc (Rust's std, C)
/// reports any stream error as EIO, and a `descriptor.write` as its code.
pub struct CappedStream {
    pub(super) inner: DynOutputStream,
    pub(super) cap: Arc<WriteCap>,
    /// Where the next byte lands in the file (for the per-file bound).
    pub(super) end: u64,
    pub(super) plugin: Arc<str>,
}

impl CappedStream {
    /// Takes `n` bytes of the cap for a write at `end`, or says why not.
    fn spend(&mut self, n: usize) -> StreamResult<()> {
        let n = n as u64;
        if self.end.saturating_add(n) > self.cap.max_file {
            let code = self.cap.refuse(&self.plugin, ErrorCode::FileTooLarge);
            return Err(stream_error(code));
        }
        if !self.cap.take(n) {
            let code = self.cap.refuse(&self.plugin, ErrorCode::InsufficientSpace);
            return Err(stream_error(code));
        }
        self.end += n;
        Ok(())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CappedStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.spend(bytes.len())?;
        self.inner.write(bytes)
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.spend(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        let n = self.inner.check_write()?;
        // No room: offer what the file takes, and refuse it in `write`.
        match self.cap.room(self.end, n as u64) {
            Ok(0) | Err(_) => Ok(n),
            Ok(room) => Ok(room as usize),
        }
    }

    fn write_zeroes(&mut self, n: usize) -> StreamResult<()> {
        self.spend(n)?;
        self.inner.write_zeroes(n)
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_offers_what_is_left_then_says_why_not() {
        let session = Arc::new(AtomicU64::new(0));
        let total = Arc::new(AtomicU64::new(5));
        let ledgers = vec![(session.clone(), 10), (total.clone(), 20)];
        let cap = WriteCap::new(ledgers.clone(), 6);
        assert_eq!(cap.room(0, 4).unwrap(), 4);
        assert!(cap.take(4));
        assert_eq!(cap.room(4, 4).unwrap(), 2, "the file's room");
        assert_eq!(cap.room(6, 4).unwrap_err(), ErrorCode::FileTooLarge);
        assert_eq!(cap.room(0, 100).unwrap(), 6, "the session's room");
        // Another call of the session writes beside it: both see it.
        let other = WriteCap::new(ledgers, 6);
        assert!(other.take(3));
        assert_eq!(cap.left(), 3);
        assert!(!cap.take(4), "taken from no ledger");
        assert_eq!(total.load(Ordering::Relaxed), 12);
        assert!(cap.take(3));
        assert_eq!(cap.room(0, 1).unwrap_err(), ErrorCode::InsufficientSpace);
        assert_eq!(cap.room(0, 0).unwrap(), 0);
        cap.give_back(2);
        assert_eq!(cap.left(), 2);
        // Each call's bytes leave the counters with its cap.
        drop(cap);
        assert_eq!(session.load(Ordering::Relaxed), 3);
        drop(other);
        assert_eq!(
            (
                session.load(Ordering::Relaxed),
                total.load(Ordering::Relaxed)
            ),
            (0, 5)
        );
    }
}

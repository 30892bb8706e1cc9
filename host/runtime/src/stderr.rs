//! `StderrCapture`: a guest's stderr. Every write succeeds — a guest runtime
//! aborts when its stderr refuses a write, so a full capture must never show —
//! and only the last [`CAPTURE`] bytes are kept (for panic messages and the
//! host log); the bytes let go are counted and reported in the log.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// How much of a guest's stderr is kept per call.
pub const CAPTURE: usize = 64 << 10;

/// The shared buffer behind every stream handed to the guest.
#[derive(Clone, Default)]
pub struct StderrCapture(Arc<Mutex<Captured>>);

#[derive(Default)]
struct Captured {
    /// The newest bytes; trimmed back to `CAPTURE` once it holds twice that,
    /// so trimming costs O(1) per byte written.
    kept: Vec<u8>,
    /// Bytes written and no longer kept.
    dropped: u64,
}

impl StderrCapture {
    /// Adds `line` as if the guest had written it to stderr: a slim guest
    /// (no WASI) reports its panics through `host.log` instead.
    pub fn write_line(&self, line: &str) {
        self.append(line.as_bytes());
        self.append(b"\n");
    }

    fn append(&self, bytes: &[u8]) {
        let mut c = self.0.lock().unwrap();
        if bytes.len() >= CAPTURE {
            c.dropped += (c.kept.len() + bytes.len() - CAPTURE) as u64;
            c.kept.clear();
            c.kept.extend_from_slice(&bytes[bytes.len() - CAPTURE..]);
            return;
        }
        c.kept.extend_from_slice(bytes);
        if c.kept.len() >= 2 * CAPTURE {
            let excess = c.kept.len() - CAPTURE;
            c.kept.drain(..excess);
            c.dropped += excess as u64;
        }
    }

    /// What the guest wrote and is still kept (at most the last `CAPTURE`
    /// bytes, possibly starting mid-line), and how many bytes were let go.
    pub fn contents(&self) -> (String, u64) {
        let c = self.0.lock().unwrap();
        let start = c.kept.len().saturating_sub(CAPTURE);
        (
            String::from_utf8_lossy(&c.kept[start..]).into_owned(),
            c.dropped + start as u64,
        )
    }

    /// Forgets everything (a reused instance starts its next call clean).
    pub fn clear(&self) {
        let mut c = self.0.lock().unwrap();
        c.kept.clear();
        c.dropped = 0;
    }
}

impl IsTerminal for StderrCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for StderrCapture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always room: the capture drops old bytes instead of refusing new ones.
        Ok(CAPTURE)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrCapture {
    async fn ready(&mut self) {}
}

impl AsyncWrite for StderrCapture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_counts_the_rest() {
        let c = StderrCapture::default();
        let line = [b'a'; 1000];
        for _ in 0..1000 {
            c.append(&line);
        }
        c.append(b"the end\n");
        let (text, dropped) = c.contents();
        assert_eq!(text.len(), CAPTURE);
        assert!(text.ends_with("the end\n"));
        assert_eq!(dropped, 1_000_000 + 8 - CAPTURE as u64);
        c.append(&vec![b'z'; 3 * CAPTURE]);
        let (text, dropped) = c.contents();
        assert_eq!(text.len(), CAPTURE);
        assert_eq!(dropped, 1_000_008 + 2 * CAPTURE as u64);
        c.clear();
        assert_eq!(c.contents(), (String::new(), 0));
    }
}

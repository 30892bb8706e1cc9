//! A child's pipes read line by line, each line capped while it is read:
//! its stdout (newline-delimited JSON-RPC, where a line over the cap is
//! dropped whole) and its stderr (into Hangar's log, where a long line
//! keeps its head and says how much was cut, at a bounded rate). A line
//! without end costs its cap, never its length.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;

/// The most of one stderr line that is kept and logged; the rest is read
/// and dropped, its length said.
pub(super) const STDERR_LINE_BYTES: usize = 4096;
/// Stderr lines logged per second per child; past it they are counted and
/// the count is logged once the rate allows again (or the stream ends).
const STDERR_LINES_PER_SECOND: u32 = 100;

/// One line (without its newline), at most `max` bytes: a longer one is
/// read to its end and dropped (`Ok(Some(empty))`). `None` at the end.
pub(super) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    Ok(read_line_head(reader, max)
        .await?
        .map(|line| if line.cut > 0 { Vec::new() } else { line.head }))
}

/// A line as [`read_line_head`] reads it.
#[derive(Debug, PartialEq)]
struct Line {
    /// Its first bytes, at most the cap (without the newline).
    head: Vec<u8>,
    /// How many bytes past the cap were read and dropped.
    cut: u64,
}

/// One line: its first `max` bytes kept, the rest read to the newline and
/// only counted, so a line without end costs `max` bytes, not its length.
/// `None` at the end.
async fn read_line_head<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut head = Vec::new();
    let mut cut = 0u64;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok((!head.is_empty() || cut > 0).then_some(Line { head, cut }));
        }
        let newline = buf.iter().position(|b| *b == b'\n');
        let (chunk, done) = match newline {
            Some(at) => (&buf[..at], at + 1),
            None => (buf, buf.len()),
        };
        let room = max - head.len();
        let kept = chunk.len().min(room);
        head.extend_from_slice(&chunk[..kept]);
        cut += (chunk.len() - kept) as u64;
        reader.consume(done);
        if newline.is_some() {
            return Ok(Some(Line { head, cut }));
        }
    }
}

/// Its stderr, line by line, into Hangar's log: each line cut at `max`
/// bytes (the cut said on its log line), at most
/// [`STDERR_LINES_PER_SECOND`] lines a second (the first line over it says
/// so; the rest are counted, and the count logged when logging resumes or
/// the stream ends).
pub(super) async fn log_stderr(name: String, stderr: pipe::Receiver, max: usize) {
    use governor::{Quota, RateLimiter};
    let per_second = std::num::NonZeroU32::new(STDERR_LINES_PER_SECOND).expect("non-zero");
    let rate = RateLimiter::direct(Quota::per_second(per_second));
    let mut reader = BufReader::new(stderr);
    let mut dropped = 0u64;
    while let Ok(Some(line)) = read_line_head(&mut reader, max).await {
        if rate.check().is_err() {
            if dropped == 0 {
                tracing::warn!(
                    upstream = %name,
                    "stderr: over {STDERR_LINES_PER_SECOND} lines a second; \
                     lines past that are counted, not logged"
                );
            }
            dropped += 1;
            continue;
        }
        if dropped > 0 {
            tracing::warn!(
                upstream = %name,
                "stderr: {dropped} lines not logged (over {STDERR_LINES_PER_SECOND} a second)"
            );
            dropped = 0;
        }
        let text = String::from_utf8_lossy(&line.head);
        if line.cut > 0 {
            tracing::info!(upstream = %name, "stderr: {text} … ({} more bytes cut)", line.cut);
        } else {
            tracing::info!(upstream = %name, "stderr: {text}");
        }
    }
    if dropped > 0 {
        tracing::warn!(
            upstream = %name,
            "stderr: {dropped} lines not logged (over {STDERR_LINES_PER_SECOND} a second)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_whole_and_long_ones_dropped() {
        let data: &[u8] = b"{\"a\":1}\n0123456789abc\n{}\ntail";
        let mut reader = BufReader::with_capacity(4, data);
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap().unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(read_line(&mut reader, 10).await.unwrap().unwrap(), b"");
        assert_eq!(read_line(&mut reader, 10).await.unwrap().unwrap(), b"{}");
        assert_eq!(read_line(&mut reader, 10).await.unwrap().unwrap(), b"tail");
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_long_line_keeps_its_head_and_counts_the_rest() {
        let long = [b'x'; 100];
        let data = [&long[..], b"\nshort\n", &long[..]].concat();
        let mut reader = BufReader::with_capacity(7, &data[..]);
        let line = |head: &[u8], cut| {
            Some(Line {
                head: head.to_vec(),
                cut,
            })
        };
        let ten = [b'x'; 10];
        assert_eq!(
            read_line_head(&mut reader, 10).await.unwrap(),
            line(&ten, 90)
        );
        assert_eq!(
            read_line_head(&mut reader, 10).await.unwrap(),
            line(b"short", 0)
        );
        // The last line has no newline: read to the end all the same.
        assert_eq!(
            read_line_head(&mut reader, 10).await.unwrap(),
            line(&ten, 90)
        );
        assert_eq!(read_line_head(&mut reader, 10).await.unwrap(), None);
    }
}

//! The `data` of Server-Sent Events, as they arrive in chunks. No SSE crate
//! is in the build, and an MCP server's answer needs only this much of the
//! format: events end at a blank line, `data:` lines join with `\n`, other
//! fields (`event`, `id`, `retry`) and comments are skipped.

/// Bytes received so far that do not yet end an event.
///
/// Each byte is looked at once: a chunk is scanned from where the last one
/// stopped, and the events it completes are cut off together, so a large
/// answer in many small chunks (or many events in one chunk) costs time in
/// proportion to its size. How much it may hold is the caller's cap on the
/// whole body.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Takes one chunk; returns the data of every event it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        // Where scanning resumes: the last old byte may be the first `\n`
        // of a blank line the new chunk completes.
        let resume = self.buf.len().saturating_sub(1);
        // `\r\n` and `\n` both end a line (a lone `\r`, which no MCP server
        // sends, is not supported).
        self.buf.extend(chunk.iter().filter(|&&b| b != b'\r'));
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = resume;
        while let Some(at) = blank_line(&self.buf[from..]) {
            let end = from + at;
            if let Some(data) = data_of(&self.buf[start..end]) {
                events.push(data);
            }
            start = end + 2;
            from = start;
        }
        self.buf.drain(..start);
        events
    }
}

/// Where the first blank line (`\n\n`) in `buf` starts.
fn blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n")
}

/// The joined `data:` lines of one event, if it has any.
fn data_of(block: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(block);
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let Some(value) = line.strip_prefix("data:") else {
            continue;
        };
        let value = value.strip_prefix(' ').unwrap_or(value);
        match &mut data {
            Some(d) => {
                d.push('\n');
                d.push_str(value);
            }
            None => data = Some(value.to_string()),
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut p = SseParser::default();
        assert!(p.feed(b"event: message\r\ndata: {\"a\"").is_empty());
        assert_eq!(
            p.feed(b":1}\r\n\r\nid: 2\ndata: x\ndata:y\n\n: ping\n\n"),
            vec!["{\"a\":1}".to_string(), "x\ny".to_string()]
        );
        assert_eq!(p.feed(b"data: last\n"), Vec::<String>::new());
        assert_eq!(p.feed(b"\n"), vec!["last".to_string()]);
    }

    #[test]
    fn many_events_in_one_chunk_and_one_event_in_many() {
        let mut p = SseParser::default();
        let many: String = (0..1000).map(|i| format!("data: {i}\n\n")).collect();
        let events = p.feed(many.as_bytes());
        assert_eq!(events.len(), 1000);
        assert_eq!(events[999], "999");
        let mut long = Vec::new();
        assert!(p.feed(b"data: ").is_empty());
        for _ in 0..1000 {
            assert!(p.feed(b"xxxxxxxx").is_empty());
            long.extend_from_slice(b"xxxxxxxx");
        }
        assert!(p.feed(b"\n").is_empty());
        let done = p.feed(b"\n");
        assert_eq!(done, vec![String::from_utf8(long).unwrap()]);
    }
}

//! The `data` of Server-Sent Events, as they arrive in chunks. No SSE crate
//! is in the build, and an MCP server's answer needs only this much of the
//! format: events end at a blank line, `data:` lines join with `\n`, other
//! fields (`event`, `id`, `retry`) and comments are skipped.

/// Bytes received so far that do not yet end an event.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Takes one chunk; returns the data of every event it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        // `\r\n` and `\n` both end a line (a lone `\r`, which no MCP server
        // sends, is not supported).
        self.buf.extend(chunk.iter().filter(|&&b| b != b'\r'));
        let mut events = Vec::new();
        while let Some(end) = blank_line(&self.buf) {
            let block: Vec<u8> = self.buf.drain(..end.1).collect();
            if let Some(data) = data_of(&block[..end.0]) {
                events.push(data);
            }
        }
        events
    }
}

/// Where the first event ends: (its length, where the next begins).
fn blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, i + 2));
        }
        i += 1;
    }
    None
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
}

//! The span queue and the thread that exports it: spans, already encoded
//! by the worker that ended them ([`super::encode`]), wait in a bounded
//! queue until a batch is full or the schedule delay passes; then one
//! thread wraps them in an export request and posts it to the OTLP/HTTP
//! endpoint with a reqwest client, on a runtime of its own. Configured as
//! the OpenTelemetry SDK's batch processor and OTLP exporter are, by the standard
//! environment: `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`,
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`,
//! `…_HEADERS` and `…_TIMEOUT`.
//!
//! The request path pays for encoding a span (a few hundred instructions,
//! no allocation once the buffers have grown) into its worker's own buffer
//! ([`super::local`]), which joins the queue in bulk: a full queue drops
//! the span (counted, and logged once, then at shutdown as
//! `dropped_span_count`) rather than making a call wait for the exporter.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::encode::Envelope;

/// Where and how spans are sent, and how they are batched.
#[derive(Debug, Clone)]
pub struct Settings {
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub schedule_delay: Duration,
    pub max_queue_size: usize,
    pub max_export_batch_size: usize,
}

impl Settings {
    /// From the standard environment; `None` when no endpoint is set.
    pub fn from_env() -> Option<Settings> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let endpoint = match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(url) => url,
            None => format!(
                "{}/v1/traces",
                var("OTEL_EXPORTER_OTLP_ENDPOINT")?.trim_end_matches('/')
            ),
        };
        let headers = var("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|v| parse_headers(&v))
            .unwrap_or_default();
        let millis = |name: &str, default: u64| {
            Duration::from_millis(
                var(name)
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(default),
            )
        };
        let timeout = match var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(_) => millis("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000),
            None => millis("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000),
        };
        let count = |name: &str, default: usize| {
            var(name)
                .and_then(|v| v.trim().parse().ok())
                .filter(|&n| n > 0)
                .unwrap_or(default)
        };
        let max_queue_size = count("OTEL_BSP_MAX_QUEUE_SIZE", 2048);
        Some(Settings {
            endpoint,
            headers,
            timeout,
            schedule_delay: millis("OTEL_BSP_SCHEDULE_DELAY", 5_000),
            max_queue_size,
            // A batch never outgrows the queue (as the SDK has it).
            max_export_batch_size: count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512).min(max_queue_size),
        })
    }
}

/// `key=value,key2=value2`, values percent-decoded (the OTLP exporter spec).
fn parse_headers(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let value: String = form_urlencoded::parse(format!("v={}", value.trim()).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            Some((key.trim().to_string(), value))
        })
        .filter(|(key, _)| !key.is_empty())
        .collect()
}

/// Finished spans waiting for the exporter thread, encoded.
pub struct Queue {
    state: Mutex<Pending>,
    /// Wakes the exporter: a batch is full, or shutdown.
    ready: Condvar,
    max_queue_size: usize,
    max_export_batch_size: usize,
}

#[derive(Default)]
struct Pending {
    /// `ScopeSpans.spans` entries, one after another.
    entries: Vec<u8>,
    /// Where each span's entry ends in `entries`: batches split there.
    ends: Vec<usize>,
    dropped: u64,
    shutdown: bool,
}

impl Queue {
    /// Queues encoded spans: `entries` holds them one after another, and
    /// `ends` says where each ends. Those that do not fit are dropped.
    pub fn push(&self, entries: &[u8], ends: &[usize]) {
        let Ok(mut pending) = self.state.lock() else {
            return;
        };
        let before = pending.ends.len();
        let room = self.max_queue_size.saturating_sub(before);
        let (kept, lost) = ends.split_at(ends.len().min(room));
        if let Some(&last) = kept.last() {
            let base = pending.entries.len();
            pending.entries.extend_from_slice(&entries[..last]);
            pending.ends.extend(kept.iter().map(|end| base + end));
        }
        let first_drop = !lost.is_empty() && {
            pending.dropped += lost.len() as u64;
            pending.dropped == lost.len() as u64
        };
        // Only the push that fills a batch wakes the exporter: a wake-up is
        // a syscall, and the timer takes care of the rest. The push that
        // fills it may also drop what did not fit: it wakes the exporter
        // all the same (else a full queue waits for the schedule).
        let now = before + kept.len();
        let wake = before < self.max_export_batch_size && now >= self.max_export_batch_size;
        drop(pending);
        if wake {
            self.ready.notify_one();
        }
        if first_drop {
            tracing::warn!(
                "traces: the span queue is full (OTEL_BSP_MAX_QUEUE_SIZE={}), spans are dropped \
                 until the exporter catches up",
                self.max_queue_size
            );
        }
    }
}

/// The exporter thread; [`Exporter::shutdown`] sends what is queued and stops it.
pub struct Exporter {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    pub fn start(settings: Settings, envelope: Arc<Envelope>) -> anyhow::Result<Exporter> {
        let queue = Arc::new(Queue {
            state: Mutex::new(Pending {
                ends: Vec::with_capacity(settings.max_queue_size),
                ..Pending::default()
            }),
            ready: Condvar::new(),
            max_queue_size: settings.max_queue_size,
            max_export_batch_size: settings.max_export_batch_size,
        });
        let thread = std::thread::Builder::new()
            .name("hangar-traces".into())
            .spawn({
                let queue = queue.clone();
                move || run(&queue, &settings, &envelope)
            })?;
        Ok(Exporter {
            queue,
            thread: Some(thread),
        })
    }

    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// Sends what is queued, then stops the thread.
    pub fn shutdown(mut self) {
        if let Ok(mut pending) = self.queue.state.lock() {
            pending.shutdown = true;
        }
        self.queue.ready.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let dropped = self.queue.state.lock().map_or(0, |p| p.dropped);
        if dropped > 0 {
            tracing::warn!(
                dropped_span_count = dropped,
                "traces: spans were dropped because the queue was full"
            );
        }
    }
}

/// The exporter thread: waits for a full batch or the schedule delay,
/// then sends what is queued in batches: only the full ones when a full
/// batch woke it (the rest waits at the head of the queue), everything at
/// the schedule delay and at shutdown.
fn run(queue: &Queue, settings: &Settings, envelope: &Envelope) {
    // The post runs on this thread, on a runtime of its own: reqwest's
    // blocking client would hand each one to a second thread of its own and
    // wait, two more wake-ups per batch on the cores the calls run on.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("traces are off: cannot start the exporter's runtime: {e}");
            return;
        }
    };
    // The client's connection pool lives in the runtime's context: it is
    // built, used and dropped inside it.
    let _context = runtime.enter();
    let client = match reqwest::Client::builder()
        .timeout(settings.timeout)
        .redirect(hangar_core::outbound::same_origin_redirects())
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("traces are off: cannot build the OTLP HTTP client: {e}");
            return;
        }
    };
    let mut sender = match Sender::new(&runtime, client, settings, envelope) {
        Ok(sender) => sender,
        Err(e) => {
            tracing::error!("traces are off: {e}");
            return;
        }
    };
    let batch = settings.max_export_batch_size;
    // Swapped with the queue's buffers, so both keep their capacity.
    let mut taken = Pending::default();
    loop {
        let (shutdown, timed_out) = {
            let Ok(mut pending) = queue.state.lock() else {
                return;
            };
            let deadline = Instant::now() + settings.schedule_delay;
            let mut timed_out = false;
            while !pending.shutdown && pending.ends.len() < batch {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    timed_out = true;
                    break;
                }
                pending = match queue.ready.wait_timeout(pending, left) {
                    Ok((guard, _)) => guard,
                    Err(_) => return,
                };
            }
            std::mem::swap(&mut pending.entries, &mut taken.entries);
            std::mem::swap(&mut pending.ends, &mut taken.ends);
            (pending.shutdown, timed_out)
        };
        // A full batch woke the thread: only full batches go now. The rest
        // waits at the head of the queue for the next one, rather than
        // going as a small post of its own (which, under load, was every
        // other post: each post costs this thread and the collector the
        // same whatever its size).
        let whole = if shutdown || timed_out {
            taken.ends.len()
        } else {
            taken.ends.len() / batch * batch
        };
        let mut start = 0;
        for chunk in taken.ends[..whole].chunks(batch) {
            let end = chunk[chunk.len() - 1];
            sender.send(&taken.entries[start..end], chunk.len());
            start = end;
        }
        if whole < taken.ends.len() {
            let Ok(mut pending) = queue.state.lock() else {
                return;
            };
            pending.put_back(&taken.entries[start..], &taken.ends[whole..], start);
        }
        taken.entries.clear();
        taken.ends.clear();
        if shutdown {
            return;
        }
    }
}

impl Pending {
    /// Puts spans taken from the queue but not sent back at its head, ahead
    /// of those queued since: `entries` ends at `ends`, which count from
    /// `offset` (where `entries` began in the buffer they were taken from).
    fn put_back(&mut self, entries: &[u8], ends: &[usize], offset: usize) {
        let len = entries.len();
        self.entries.splice(0..0, entries.iter().copied());
        for end in &mut self.ends {
            *end += len;
        }
        self.ends.splice(0..0, ends.iter().map(|end| end - offset));
    }
}

/// Posts batches of encoded spans.
///
/// What does not change from post to post is made once: the endpoint's
/// URL (parsed per post, it was an eighth of this thread's CPU time under
/// load), the headers, and the body's buffer, which each post hands to the
/// client as `Bytes` and takes back once the client has dropped them.
struct Sender<'a> {
    runtime: &'a tokio::runtime::Runtime,
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    body: BytesMut,
    envelope: &'a Envelope,
    /// Whether the last export failed: a failure is logged when it starts
    /// and when it ends, not once per batch.
    failing: bool,
}

impl<'a> Sender<'a> {
    fn new(
        runtime: &'a tokio::runtime::Runtime,
        client: reqwest::Client,
        settings: &Settings,
        envelope: &'a Envelope,
    ) -> anyhow::Result<Sender<'a>> {
        let url = reqwest::Url::parse(&settings.endpoint)
            .map_err(|e| anyhow::anyhow!("the OTLP endpoint {}: {e}", settings.endpoint))?;
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        for (key, value) in &settings.headers {
            match (
                HeaderName::try_from(key.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                (Ok(key), Ok(value)) => {
                    headers.append(key, value);
                }
                _ => tracing::warn!(
                    "traces: the OTLP header {key:?} is not a valid header, left out"
                ),
            }
        }
        Ok(Sender {
            runtime,
            client,
            url,
            headers,
            body: BytesMut::new(),
            envelope,
            failing: false,
        })
    }

    /// Posts `entries`, `count` encoded spans, as one export request.
    fn send(&mut self, entries: &[u8], count: usize) {
        // `wrap` reserves room first: once the last post's body is dropped,
        // that takes its allocation back rather than making a new one.
        self.envelope.wrap(entries, &mut self.body);
        let request = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(self.body.split().freeze());
        // The runtime runs only while a batch is posted: a yield first lets
        // the pooled connection see whether the collector closed it meanwhile.
        let sent = self.runtime.block_on(async {
            tokio::task::yield_now().await;
            request.send().await
        });
        let outcome = match sent {
            Ok(answer) if answer.status().is_success() => Ok(()),
            Ok(answer) => Err(format!("the collector answered {}", answer.status())),
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!("traces: exporting to {} again", self.url);
            }
            Ok(()) => {}
            Err(e) => {
                if !self.failing {
                    tracing::warn!(
                        "traces: exporting {count} spans to {} failed: {e}",
                        self.url
                    );
                }
                self.failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_put_back_go_ahead_of_those_queued_since() {
        // Taken: spans "aa", "bbb", "c" (ends 2, 5, 6); the first two went.
        let taken = b"aabbbc";
        let mut pending = Pending {
            entries: b"dddee".to_vec(),
            ends: vec![3, 5],
            ..Pending::default()
        };
        pending.put_back(&taken[5..], &[6], 5);
        assert_eq!(pending.entries, b"cdddee");
        assert_eq!(pending.ends, vec![1, 4, 6]);
    }

    #[test]
    fn headers_are_pairs_with_decoded_values() {
        assert_eq!(
            parse_headers("api-key=a%20b , x-tenant=7,broken,=empty"),
            vec![
                ("api-key".to_string(), "a b".to_string()),
                ("x-tenant".to_string(), "7".to_string())
            ]
        );
    }
}

//! Prometheus metrics: one [`Metrics`] registry per process, shared by
//! `Arc`. The pipeline counts each call as it ends (tool, stage, outcome,
//! fuel, dropped events) and times each stage, into the counting thread's
//! own tally ([`tally`]); what lives in other
//! components (instance slots, DB pools, result caches) is read at scrape
//! time from a [`Snapshot`], so the backends carry no metrics handle.
//! `GET /metrics` (see [`crate::server`]) renders it in the text format.

mod outcome;
mod tally;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use outcome::{CallOutcome, StageTimes};
use tally::{Tallies, TallySeries};

/// The tool label of a call to a name that is not (or not visibly) a tool:
/// never the name asked for, so a client cannot make a series per name.
pub const UNKNOWN_TOOL: &str = "(unknown)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: &'static str,
}

/// A code-mode program's tool call: which tool, how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProgramCallLabels {
    tool: String,
    transport: &'static str,
    outcome: &'static str,
}

/// A tool, for the series counted per tool outside the tallies.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

/// Where the instance-slot gauge is read at scrape time: the slots in use
/// by pool (`tools`, `stages`). Whoever owns the scheduler hands one over,
/// so the `/metrics` route reads it without naming the runtime.
pub type InstanceGauge = std::sync::Arc<dyn Fn() -> Vec<(&'static str, u64)> + Send + Sync>;

/// What is read from the rest of the server at scrape time.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Wasm instance slots in use, by pool (`tools`, `stages`).
    pub instances: Vec<(&'static str, u64)>,
    /// DB connections lent out, and callers waiting for one, over every pool.
    pub db_in_use: u64,
    pub db_waiting: u64,
    /// Result-cache hits and misses over every cached statement.
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// What stood before the auth checks (the pipeline's `Door`).
    pub auth: AuthCounts,
}

/// The door's counters: auth components run, checks that refused the
/// caller (a plugin's or a bearer token's), and callers answered 429
/// before anything was checked (`auth_failures`).
#[derive(Debug, Default, Clone, Copy)]
pub struct AuthCounts {
    pub checks: u64,
    pub failures: u64,
    pub throttled: u64,
}

/// The registry and every series Hangar exports.
pub struct Metrics {
    registry: Registry,
    /// Calls, fuel, dropped events and stage latencies, counted per thread.
    tallies: Arc<Tallies>,
    busy: Counter,
    rate_limited: Counter,
    reloads: Counter,
    instances: Family<PoolLabels, Gauge>,
    /// Tool calls made by code-mode programs (`run`), also counted in
    /// `hangar_calls_total` as every call is.
    program_calls: Family<ProgramCallLabels, Counter>,
    /// Results that did not match their tool's `outputSchema`, by tool.
    output_invalid: Family<ToolLabels, Counter>,
    db_in_use: Gauge,
    db_waiting: Gauge,
    /// Copied from the caches' own counters at scrape time.
    cache_hits: Counter,
    cache_misses: Counter,
    auth_checks: Counter,
    auth_failures: Counter,
    auth_throttled: Counter,
    /// `[server] metrics = false`: nothing is counted or timed.
    off: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("hangar");
        let instances = Family::<PoolLabels, Gauge>::default();
        let m = Metrics {
            tallies: Tallies::new(),
            busy: Counter::default(),
            rate_limited: Counter::default(),
            reloads: Counter::default(),
            instances,
            program_calls: Family::default(),
            output_invalid: Family::default(),
            db_in_use: Gauge::default(),
            db_waiting: Gauge::default(),
            cache_hits: Counter::default(),
            cache_misses: Counter::default(),
            auth_checks: Counter::default(),
            auth_failures: Counter::default(),
            auth_throttled: Counter::default(),
            registry: Registry::default(),
            off: false,
        };
        let r = &mut registry;
        // hangar_calls, hangar_stage_duration_seconds, hangar_fuel_consumed
        // and hangar_dropped_events.
        r.register_collector(Box::new(TallySeries(m.tallies.clone())));
        r.register(
            "busy_rejections",
            "Calls refused because no instance slot or concurrency permit came free in time",
            m.busy.clone(),
        );
        r.register(
            "rate_limit_rejections",
            "Calls refused by a rate limit",
            m.rate_limited.clone(),
        );
        r.register("reloads", "Catalog reloads", m.reloads.clone());
        r.register(
            "program_calls",
            "Tool calls made by code-mode programs (run), by tool and outcome",
            m.program_calls.clone(),
        );
        r.register(
            "output_invalid",
            "Results that did not match their tool's outputSchema (refused under strict, passed on under warn), by tool",
            m.output_invalid.clone(),
        );
        r.register(
            "wasm_instances_in_use",
            "Wasm instance slots in use, by pool",
            m.instances.clone(),
        );
        r.register(
            "db_pool_in_use",
            "Database connections lent out",
            m.db_in_use.clone(),
        );
        r.register(
            "db_pool_waiting",
            "Calls waiting for a database connection",
            m.db_waiting.clone(),
        );
        r.register(
            "result_cache_hits",
            "Result-cache hits of DB tools and resources",
            m.cache_hits.clone(),
        );
        r.register(
            "result_cache_misses",
            "Result-cache misses of DB tools and resources",
            m.cache_misses.clone(),
        );
        r.register(
            "auth_checks",
            "Auth components run (tool, resource and prompt checks, and listings)",
            m.auth_checks.clone(),
        );
        r.register(
            "auth_failures",
            "Auth checks and bearer tokens that refused the caller",
            m.auth_failures.clone(),
        );
        r.register(
            "auth_throttled",
            "Requests answered 429 before any auth check ran (auth_failures)",
            m.auth_throttled.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Metrics that count nothing (`[server] metrics = false`), so calls
    /// pay nothing for them.
    pub fn off() -> Metrics {
        Metrics {
            off: true,
            ..Metrics::new()
        }
    }

    /// Whether calls are counted and timed.
    pub fn is_on(&self) -> bool {
        !self.off
    }

    /// Counts one finished call and times its stages.
    pub fn call_ended(&self, call: CallOutcome<'_>) {
        if self.off {
            return;
        }
        self.tallies.call_ended(&call);
        if call.in_program {
            self.program_calls
                .get_or_create(&ProgramCallLabels {
                    tool: call.tool.to_string(),
                    transport: "code",
                    outcome: call.outcome,
                })
                .inc();
        }
        match call.outcome {
            "busy" => {
                self.busy.inc();
            }
            "rate_limited" => {
                self.rate_limited.inc();
            }
            _ => {}
        }
    }

    /// Counts a result that did not match its tool's `outputSchema`.
    pub fn output_invalid(&self, tool: &str) {
        if self.off {
            return;
        }
        self.output_invalid
            .get_or_create(&ToolLabels {
                tool: tool.to_string(),
            })
            .inc();
    }

    /// Counts one catalog reload (hot reload calls this once per swap).
    pub fn reloaded(&self) {
        self.reloads.inc();
    }

    /// The text exposition, with `live` figures as of now.
    pub fn render(&self, live: &Snapshot) -> String {
        for (pool, n) in &live.instances {
            self.instances
                .get_or_create(&PoolLabels { pool })
                .set(*n as i64);
        }
        self.db_in_use.set(live.db_in_use as i64);
        self.db_waiting.set(live.db_waiting as i64);
        // The caches count for themselves; the exported counter mirrors them.
        self.cache_hits
            .inner()
            .store(live.cache_hits, Ordering::Relaxed);
        self.cache_misses
            .inner()
            .store(live.cache_misses, Ordering::Relaxed);
        for (counter, n) in [
            (&self.auth_checks, live.auth.checks),
            (&self.auth_failures, live.auth.failures),
            (&self.auth_throttled, live.auth.throttled),
        ] {
            counter.inner().store(n, Ordering::Relaxed);
        }
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// `text` (an exposition) without the samples labelled with one of the
/// `tools`: what a caller who may not see those tools is shown.
pub fn without_tools(text: &str, tools: &[&str]) -> String {
    if tools.is_empty() {
        return text.to_string();
    }
    let labels: Vec<String> = tools.iter().map(|t| format!("tool=\"{t}\"")).collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if !labels.iter().any(|l| line.contains(l.as_str())) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::Stage;

    fn sample<'a>(text: &'a str, line_start: &str) -> Option<&'a str> {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
    }

    #[test]
    fn calls_are_counted_by_tool_stage_and_outcome() {
        let m = Metrics::new();
        let ok = CallOutcome {
            tool: "echo",
            stage: "-",
            outcome: "ok",
            fuel: 40_000,
            dropped_events: 0,
            stages: StageTimes::default(),
            in_program: false,
        };
        let mut handled = StageTimes::default();
        handled.set(Stage::Handler, 70_000);
        m.call_ended(CallOutcome {
            stages: handled,
            ..ok
        });
        m.call_ended(ok);
        m.call_ended(CallOutcome {
            stage: "rate_limit",
            outcome: "rate_limited",
            fuel: 0,
            dropped_events: 2,
            ..ok
        });
        m.call_ended(CallOutcome {
            in_program: true,
            ..ok
        });
        m.reloaded();
        let text = m.render(&Snapshot {
            instances: vec![("tools", 3)],
            cache_hits: 5,
            ..Snapshot::default()
        });
        let get = |s| sample(&text, s);
        // The program's call counts as a call too, and as a program's.
        assert_eq!(
            get(r#"hangar_calls_total{tool="echo",stage="-",outcome="ok"}"#),
            Some("3")
        );
        assert_eq!(
            get(r#"hangar_program_calls_total{tool="echo",transport="code",outcome="ok"}"#),
            Some("1")
        );
        assert_eq!(
            get(r#"hangar_calls_total{tool="echo",stage="rate_limit",outcome="rate_limited"}"#),
            Some("1")
        );
        assert_eq!(get("hangar_rate_limit_rejections_total"), Some("1"));
        assert_eq!(get("hangar_busy_rejections_total"), Some("0"));
        assert_eq!(
            get(r#"hangar_fuel_consumed_total{tool="echo"}"#),
            Some("120000")
        );
        assert_eq!(
            get(r#"hangar_dropped_events_total{tool="echo"}"#),
            Some("2")
        );
        assert_eq!(
            get(r#"hangar_stage_duration_seconds_count{stage="handler"}"#),
            Some("1")
        );
        assert_eq!(
            get(r#"hangar_wasm_instances_in_use{pool="tools"}"#),
            Some("3")
        );
        assert_eq!(get("hangar_result_cache_hits_total"), Some("5"));
        assert_eq!(get("hangar_reloads_total"), Some("1"));
    }

    #[test]
    fn metrics_that_are_off_count_nothing() {
        let m = Metrics::off();
        let mut handled = StageTimes::default();
        handled.set(Stage::Handler, 70_000);
        assert!(!m.is_on());
        m.call_ended(CallOutcome {
            tool: "echo",
            stage: "-",
            outcome: "ok",
            fuel: 1,
            dropped_events: 0,
            stages: handled,
            in_program: false,
        });
        let text = m.render(&Snapshot::default());
        assert_eq!(
            sample(&text, r#"hangar_calls_total{tool="echo""#),
            None,
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"hangar_stage_duration_seconds_count{stage="handler"}"#
            ),
            None
        );
    }

    #[test]
    fn hidden_tools_series_are_left_out() {
        let m = Metrics::new();
        for tool in ["echo", "admin.purge", "admin"] {
            m.call_ended(CallOutcome {
                tool,
                stage: "-",
                outcome: "ok",
                fuel: 5,
                dropped_events: 0,
                stages: StageTimes::default(),
                in_program: false,
            });
        }
        let text = without_tools(&m.render(&Snapshot::default()), &["admin"]);
        assert!(sample(&text, r#"hangar_calls_total{tool="echo""#).is_some());
        assert!(sample(&text, r#"hangar_calls_total{tool="admin.purge""#).is_some());
        assert!(!text.contains(r#"tool="admin""#), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}

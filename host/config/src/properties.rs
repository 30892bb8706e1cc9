//! Properties of the config loader over arbitrary input: it never panics
//! (on any text, or on TOML shaped like a config), what an operator writes
//! reads back as written, and the tool > plugin > global order of limits
//! holds field by field.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use toml::Value;

use super::{Config, LimitOverrides, Limits};

/// Keys of the schema, so generated tables often reach deep into it.
const KEYS: &[&str] = &[
    "server",
    "limits",
    "plugins",
    "tools",
    "resources",
    "prompts",
    "connectors",
    "auth",
    "http",
    "credentials",
    "kv",
    "listen",
    "cache_dir",
    "max_body_bytes",
    "allowed_hosts",
    "allowed_origins",
    "max_instances",
    "stage_instances",
    "long_running_slots",
    "long_running_after",
    "page_size",
    "errors",
    "allow_execute",
    "ui",
    "trace_ids",
    "metrics",
    "catalog",
    "fuel",
    "deadline",
    "memory_mib",
    "max_concurrent",
    "queue_timeout",
    "max_events",
    "max_event_bytes",
    "max_output_bytes",
    "max_content_blocks",
    "max_http_bytes",
    "config",
    "prefix",
    "instances",
    "reuse",
    "max_calls",
    "max_idle",
    "pool_size",
    "grants",
    "name",
    "title",
    "description",
    "use",
    "statement",
    "inputs",
    "type",
    "required",
    "default",
    "items",
    "from_claim",
    "cache",
    "ttl",
    "mappers",
    "input",
    "output",
    "visible_to",
    "read_only",
    "max_rows",
    "plugin",
    "policy",
    "kind",
    "url",
    "path",
    "init",
    "uri",
    "uri_template",
    "mime_type",
    "value",
    "token_url",
    "client_id",
    "client_secret",
    "scopes",
    "backend",
    "max_key_bytes",
    "max_value_bytes",
    "max_keys",
    "extra_ca",
    "resolve",
];

/// Values the schema accepts somewhere, and some it does not.
const WORDS: &[&str] = &[
    "",
    "1s",
    "250ms",
    "0s",
    "18446744073709551615s",
    "none",
    "full",
    "meta",
    "both",
    "result",
    "jsonrpc",
    "postgres",
    "sqlite",
    "embedded",
    "redis",
    "static",
    "oauth2-client-credentials",
    "integer",
    "string",
    "array",
    "object",
    "127.0.0.1:0",
    "[::1]:8080",
    "not an address",
    "{{ env.HANGAR_PROPTEST_UNSET }}",
    "{{ file./nonexistent }}",
    "{{",
    "demo://products/{id}",
    "SELECT {{ inputs.id }}",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

fn toml_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        3 => proptest::sample::select(WORDS).prop_map(|w| Value::String(w.into())),
        1 => any::<String>().prop_map(Value::String),
        2 => any::<i64>().prop_map(Value::Integer),
        1 => (0i64..1 << 20).prop_map(Value::Integer),
        1 => any::<f64>().prop_map(Value::Float),
        1 => any::<bool>().prop_map(Value::Boolean),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(key(), inner, 0..6).prop_map(|m| Value::Table(m.into_iter().collect())),
        ]
    })
}

/// A document whose top-level keys are mostly the config's sections.
fn config_like() -> impl Strategy<Value = String> {
    btree_map(key(), toml_value(), 0..8).prop_filter_map("renders as TOML", |m| {
        toml::to_string(&Value::Table(m.into_iter().collect())).ok()
    })
}

/// Uses what a loaded config offers, as the server does when it starts.
fn exercise(config: &Config) {
    let _ = config.max_memory_bytes();
    let _ = config.limits.memory_bytes();
    for name in config.plugins.keys() {
        let _ = config.limits_for(name, "").memory_bytes();
    }
    for tool in &config.tools {
        let _ = config.limits_for("", &tool.name);
        let _ = config.tool(&tool.name);
    }
    for r in &config.resources {
        let _ = r.check();
        let _ = config.resource(r.key());
    }
    for p in &config.prompts {
        let _ = config.prompt(&p.name);
    }
}

/// Durations written in whole milliseconds, as an operator would.
fn millis() -> impl Strategy<Value = Duration> {
    (0u64..1 << 40).prop_map(Duration::from_millis)
}

/// TOML integers are signed 64-bit.
fn count() -> impl Strategy<Value = u64> {
    0..=i64::MAX as u64
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        (count(), millis(), count(), any::<u32>(), millis()),
        (any::<u32>(), count(), count(), any::<u32>(), count()),
    )
        .prop_map(
            |((fuel, deadline, memory_mib, max_concurrent, queue_timeout), more)| {
                let (
                    max_events,
                    max_event_bytes,
                    max_output_bytes,
                    max_content_blocks,
                    max_http_bytes,
                ) = more;
                Limits {
                    fuel,
                    deadline,
                    memory_mib,
                    max_concurrent,
                    queue_timeout,
                    max_events,
                    max_event_bytes,
                    max_output_bytes,
                    max_content_blocks,
                    max_http_bytes,
                }
            },
        )
}

fn overrides() -> impl Strategy<Value = LimitOverrides> {
    (
        proptest::option::of(count()),
        proptest::option::of(millis()),
        proptest::option::of(count()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(millis()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(
            |(fuel, deadline, memory_mib, max_concurrent, queue_timeout, max_events)| {
                LimitOverrides {
                    fuel,
                    deadline,
                    memory_mib,
                    max_concurrent,
                    queue_timeout,
                    max_events,
                    ..LimitOverrides::default()
                }
            },
        )
}

fn ms(d: Duration) -> Value {
    Value::String(format!("{}ms", d.as_millis()))
}

fn int(n: impl Into<u64>) -> Value {
    Value::Integer(i64::try_from(n.into()).expect("generated within i64"))
}

fn limits_table(l: &Limits) -> Value {
    let mut t = toml::Table::new();
    t.insert("fuel".into(), int(l.fuel));
    t.insert("deadline".into(), ms(l.deadline));
    t.insert("memory_mib".into(), int(l.memory_mib));
    t.insert("max_concurrent".into(), int(l.max_concurrent));
    t.insert("queue_timeout".into(), ms(l.queue_timeout));
    t.insert("max_events".into(), int(l.max_events));
    t.insert("max_event_bytes".into(), int(l.max_event_bytes));
    t.insert("max_output_bytes".into(), int(l.max_output_bytes));
    t.insert("max_content_blocks".into(), int(l.max_content_blocks));
    t.insert("max_http_bytes".into(), int(l.max_http_bytes));
    Value::Table(t)
}

fn overrides_table(o: &LimitOverrides) -> Value {
    let mut t = toml::Table::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            t.insert(key.into(), v);
        }
    };
    put("fuel", o.fuel.map(int));
    put("deadline", o.deadline.map(ms));
    put("memory_mib", o.memory_mib.map(int));
    put("max_concurrent", o.max_concurrent.map(int));
    put("queue_timeout", o.queue_timeout.map(ms));
    put("max_events", o.max_events.map(int));
    Value::Table(t)
}

fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().cloned().map(Value::String).collect())
}

/// One `[plugins.X]` and one `[[tools]]` entry with what an operator sets.
#[derive(Debug, Clone)]
struct Entries {
    plugin: String,
    plugin_config: BTreeMap<String, String>,
    prefix: Option<String>,
    plugin_limits: LimitOverrides,
    tool: String,
    tool_limits: LimitOverrides,
    visible_to: BTreeMap<String, Vec<String>>,
    allowed_hosts: Vec<String>,
}

fn entries() -> impl Strategy<Value = Entries> {
    (
        (
            any::<String>(),
            btree_map(any::<String>(), any::<String>(), 0..4),
            proptest::option::of(any::<String>()),
            overrides(),
        ),
        (
            any::<String>(),
            overrides(),
            btree_map(any::<String>(), vec(any::<String>(), 0..3), 0..3),
            vec(any::<String>(), 0..3),
        ),
    )
        .prop_map(
            |(
                (plugin, plugin_config, prefix, plugin_limits),
                (tool, tool_limits, visible_to, allowed_hosts),
            )| Entries {
                plugin,
                plugin_config,
                prefix,
                plugin_limits,
                tool,
                tool_limits,
                visible_to,
                allowed_hosts,
            },
        )
}

fn render(global: &Limits, e: &Entries) -> String {
    let mut server = toml::Table::new();
    server.insert("allowed_hosts".into(), strings(&e.allowed_hosts));
    let mut plugin = toml::Table::new();
    plugin.insert("limits".into(), overrides_table(&e.plugin_limits));
    let config = e
        .plugin_config
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())));
    plugin.insert("config".into(), Value::Table(config.collect()));
    if let Some(prefix) = &e.prefix {
        plugin.insert("prefix".into(), Value::String(prefix.clone()));
    }
    let mut tool = toml::Table::new();
    tool.insert("name".into(), Value::String(e.tool.clone()));
    tool.insert("limits".into(), overrides_table(&e.tool_limits));
    let rules = e.visible_to.iter().map(|(k, v)| (k.clone(), strings(v)));
    tool.insert("visible_to".into(), Value::Table(rules.collect()));
    let mut doc = toml::Table::new();
    doc.insert("server".into(), Value::Table(server));
    doc.insert("limits".into(), limits_table(global));
    doc.insert(
        "plugins".into(),
        Value::Table(
            [(e.plugin.clone(), Value::Table(plugin))]
                .into_iter()
                .collect(),
        ),
    );
    doc.insert("tools".into(), Value::Array(vec![Value::Table(tool)]));
    toml::to_string(&Value::Table(doc)).expect("a table renders")
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        if let Ok(config) = Config::parse(&text) {
            exercise(&config);
        }
    }

    #[test]
    fn config_shaped_toml_never_panics(text in config_like()) {
        if let Ok(config) = Config::parse(&text) {
            exercise(&config);
        }
    }

    #[test]
    fn what_an_operator_writes_reads_back(global in limits(), e in entries()) {
        let text = render(&global, &e);
        let config = Config::parse(&text).map_err(|err| TestCaseError::fail(format!("{err}\n{text}")))?;
        prop_assert_eq!(config.limits, global);
        prop_assert_eq!(&config.server.allowed_hosts, &e.allowed_hosts);
        let plugin = &config.plugins[&e.plugin];
        prop_assert_eq!(&plugin.prefix, &e.prefix);
        let read: BTreeMap<String, String> = plugin
            .config
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        prop_assert_eq!(&read, &e.plugin_config);
        let tool = config.tool(&e.tool).expect("the tool entry");
        prop_assert_eq!(tool.visible_to.as_ref(), Some(&e.visible_to));

        // Limits: the tool's own, else the plugin's, else the global one.
        let got = config.limits_for(&e.plugin, &e.tool);
        let (p, t) = (&e.plugin_limits, &e.tool_limits);
        prop_assert_eq!(got.fuel, t.fuel.or(p.fuel).unwrap_or(global.fuel));
        prop_assert_eq!(got.deadline, t.deadline.or(p.deadline).unwrap_or(global.deadline));
        prop_assert_eq!(got.memory_mib, t.memory_mib.or(p.memory_mib).unwrap_or(global.memory_mib));
        prop_assert_eq!(
            got.max_concurrent,
            t.max_concurrent.or(p.max_concurrent).unwrap_or(global.max_concurrent)
        );
        prop_assert_eq!(
            got.queue_timeout,
            t.queue_timeout.or(p.queue_timeout).unwrap_or(global.queue_timeout)
        );
        prop_assert_eq!(got.max_events, t.max_events.or(p.max_events).unwrap_or(global.max_events));
        prop_assert_eq!(got.max_output_bytes, global.max_output_bytes);
        let biggest = [global.memory_mib, p.memory_mib.unwrap_or(0), t.memory_mib.unwrap_or(0)]
            .into_iter()
            .max()
            .unwrap();
        prop_assert_eq!(config.max_memory_bytes(), (biggest as usize) << 20);
    }
}

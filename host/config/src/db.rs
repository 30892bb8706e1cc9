//! The DB part of a `[[tools]]` and a `[[resources]]` entry: the connector,
//! the statement, its declared inputs, the read-only rule, the row cap and
//! the result cache. Both entries read it flattened (the keys sit in the
//! entry's own table), so it is written once, and what runs a statement
//! takes it whole, whichever entry it came from.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// The keys a `[[tools]]` and a `[[resources]]` entry share for a SQL
/// statement. With `statement` the entry is a DB tool or resource; without,
/// the other keys are left at their defaults.
///
/// It is read with `#[serde(flatten)]`, so it takes no
/// `deny_unknown_fields` of its own: the entry that holds it refuses a key
/// neither of them knows.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct DbConfig {
    /// The connector the statement runs on.
    #[serde(rename = "use")]
    pub connector: Option<String>,
    /// The SQL, with `{{ inputs.x }}` (a tool's inputs, a resource's URI
    /// template variables) and `{{ env.X }}` placeholders.
    pub statement: Option<String>,
    /// The declared inputs, by name (a resource's template variables are
    /// strings when not declared).
    #[serde(default)]
    pub inputs: BTreeMap<String, InputSpec>,
    /// Keep results for the same arguments (and caller) for a while.
    pub cache: Option<CacheConfig>,
    /// Run inside a read-only transaction (default true).
    #[serde(default = "yes")]
    pub read_only: bool,
    /// More rows than this are cut, and the result says so.
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
}

fn yes() -> bool {
    true
}

fn default_max_rows() -> usize {
    1000
}

/// One declared input of a DB tool.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Its JSON type.
    #[serde(rename = "type")]
    pub ty: InputType,
    /// Shown to clients in the tool's input schema.
    pub description: Option<String>,
    /// Whether a call must give it.
    #[serde(default)]
    pub required: bool,
    /// The value bound when a call leaves it out.
    pub default: Option<serde_json::Value>,
    /// Element type of an `array` input.
    pub items: Option<InputType>,
    /// Bind this input from the caller's principal claim (e.g. `sub`), never
    /// from the arguments.
    pub from_claim: Option<String>,
}

/// The JSON type of a DB tool's input.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl InputType {
    pub fn as_str(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Integer => "integer",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Array => "array",
            InputType::Object => "object",
        }
    }
}

/// `cache = { ttl = "60s" }`: results kept per arguments (and caller).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// How long a result is served from the cache.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub ttl: Duration,
    /// Bytes of results one tool (or resource) keeps; the least used go first.
    #[serde(default = "default_cache_bytes")]
    pub max_bytes: u64,
    /// A larger result is served but not kept.
    #[serde(default = "default_cache_entry_bytes")]
    pub max_entry_bytes: u64,
}

fn default_cache_bytes() -> u64 {
    32 << 20
}

fn default_cache_entry_bytes() -> u64 {
    1 << 20
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    #[test]
    fn a_tool_and_a_resource_read_the_same_db_keys() {
        let keys = r#"
            use = "main"
            statement = "SELECT {{ inputs.id }}"
            inputs.id = { type = "integer" }
            read_only = false
            max_rows = 5
            cache = { ttl = "2s", max_bytes = 10 }
        "#;
        let text = format!(
            "[[tools]]\nname = \"t\"\n{keys}\n[[resources]]\nuri_template = \"db://x/{{id}}\"\n{keys}"
        );
        let c = Config::parse(&text).unwrap();
        assert_eq!(c.resources[0].key(), "db://x/{id}");
        for db in [&c.tools[0].db, &c.resources[0].db] {
            assert_eq!(db.connector.as_deref(), Some("main"));
            assert_eq!(db.statement.as_deref(), Some("SELECT {{ inputs.id }}"));
            assert_eq!(db.inputs["id"].ty, InputType::Integer);
            assert!(!db.read_only);
            assert_eq!(db.max_rows, 5);
            let cache = db.cache.as_ref().unwrap();
            assert_eq!(cache.ttl, Duration::from_secs(2));
            assert_eq!((cache.max_bytes, cache.max_entry_bytes), (10, 1 << 20));
        }
    }

    #[test]
    fn without_a_statement_the_db_keys_keep_their_defaults() {
        let c =
            Config::parse("[[tools]]\nname = \"echo\"\n[[resources]]\nuri = \"a://b\"\n").unwrap();
        for db in [&c.tools[0].db, &c.resources[0].db] {
            assert!(db.connector.is_none() && db.statement.is_none() && db.cache.is_none());
            assert!(db.inputs.is_empty());
            assert!(db.read_only);
            assert_eq!(db.max_rows, 1000);
        }
    }

    #[test]
    fn an_unknown_key_in_a_tool_or_a_resource_is_refused_by_name() {
        for text in [
            "[[tools]]\nname = \"t\"\nstatment = \"SELECT 1\"\n",
            "[[tools]]\nname = \"t\"\nuse = \"main\"\nstatement = \"SELECT 1\"\nmax_row = 3\n",
            "[[resources]]\nuri = \"a://b\"\nstatment = \"SELECT 1\"\n",
            "[[resources]]\nuri = \"a://b\"\nuse = \"main\"\nstatement = \"SELECT 1\"\nmax_row = 3\n",
        ] {
            let err = Config::parse(text).unwrap_err().to_string();
            let key = if text.contains("statment") {
                "statment"
            } else {
                "max_row"
            };
            assert!(
                err.contains(&format!("unknown field `{key}`")),
                "{text}\n{err}"
            );
        }
    }

    #[test]
    fn a_bad_value_of_a_db_key_is_refused() {
        for text in [
            "[[tools]]\nname = \"t\"\nmax_rows = \"many\"\n",
            "[[tools]]\nname = \"t\"\nread_only = 1\n",
            "[[resources]]\nuri = \"a://b\"\ncache = { ttl = \"soon\" }\n",
            "[[resources]]\nuri = \"a://b\"\ninputs.id = { type = \"date\" }\n",
            "[[resources]]\nuri = \"a://b\"\ninputs.id = { type = \"string\", requird = true }\n",
        ] {
            assert!(Config::parse(text).is_err(), "{text}");
        }
    }
}

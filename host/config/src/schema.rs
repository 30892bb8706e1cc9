//! The JSON Schema of `hangar.toml` (`Config::schema`, which `hangar
//! config --schema` prints): what of it is written by hand, and the test
//! that docs/configuration.md names every table and key in it.
//!
//! The schema is derived from the config types themselves: schemars reads
//! their serde attributes, so `deny_unknown_fields`, defaults and tagged
//! enums come out as they parse, and their doc comments become the
//! descriptions. What serde reads through a function of its own gets its
//! schema by hand: durations here; rates, proxies and `[oauth] rest`
//! beside their types.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// How a duration is written (humantime): the schema of every field read
/// with `humantime_serde`.
pub struct Humantime;

impl JsonSchema for Humantime {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A duration as text: a number and a unit, e.g. \"250ms\", \"30s\", \"5m\", \"1h\" or \"1h 30m\"; \"0s\" where zero turns a limit off."
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::Value;

    use super::super::Config;

    fn schema() -> Value {
        Config::schema()
    }

    /// The keys of every table and every key of every table, each with the
    /// top-level tables it can be written under: `owner` is the definition
    /// (or inline table) the key belongs to, so a key shared through one
    /// definition (`limits` of a plugin, a tool, a resource) is documented once.
    #[derive(Default)]
    struct Keys {
        /// (owner, key) → the top-level tables it is reached from.
        under: BTreeMap<(String, String), BTreeSet<String>>,
    }

    impl Keys {
        fn walk(
            &mut self,
            node: &Value,
            defs: &Value,
            owner: &str,
            top: &str,
            seen: &mut Vec<String>,
        ) {
            let Some(obj) = node.as_object() else { return };
            if let Some(name) = obj
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                && !seen.iter().any(|s| s == name)
            {
                seen.push(name.to_string());
                self.walk(&defs[name], defs, name, top, seen);
                seen.pop();
            }
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                for (key, value) in props {
                    self.under
                        .entry((owner.to_string(), key.clone()))
                        .or_default()
                        .insert(top.to_string());
                    self.walk(value, defs, &format!("{owner}.{key}"), top, seen);
                }
            }
            for nested in ["additionalProperties", "items"] {
                if let Some(value) = obj.get(nested) {
                    self.walk(value, defs, owner, top, seen);
                }
            }
            for group in ["oneOf", "anyOf", "allOf"] {
                for value in obj
                    .get(group)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.walk(value, defs, owner, top, seen);
                }
            }
        }
    }

    fn schema_keys(schema: &Value) -> Keys {
        let mut keys = Keys::default();
        let defs = &schema["$defs"];
        for (top, value) in schema["properties"].as_object().expect("properties") {
            keys.walk(value, defs, top, top, &mut Vec::new());
        }
        keys
    }

    /// The prose of a Markdown page (fenced code blocks left out), by
    /// heading: each heading's text and its lines up to the next heading
    /// of the same or a higher level (its subsections included).
    fn sections(markdown: &str) -> Vec<(String, String)> {
        let mut lines: Vec<(usize, &str)> = Vec::new();
        let mut fenced = false;
        for line in markdown.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            } else if !fenced {
                let level = line.chars().take_while(|&c| c == '#').count();
                let heading = level > 0 && line[level..].starts_with(' ');
                lines.push((if heading { level } else { 0 }, line));
            }
        }
        let mut out = Vec::new();
        for (i, &(level, line)) in lines.iter().enumerate() {
            if level == 0 {
                continue;
            }
            let end = lines[i + 1..]
                .iter()
                .position(|&(l, _)| l > 0 && l <= level)
                .map_or(lines.len(), |n| i + 1 + n);
            let body: Vec<&str> = lines[i + 1..end].iter().map(|&(_, l)| l).collect();
            out.push((line[level..].trim().to_string(), body.join("\n")));
        }
        out
    }

    /// The first word of every `code span` in `text`: `` `max_idle = "60s"` ``
    /// mentions `max_idle`.
    fn mentioned(text: &str) -> BTreeSet<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|span| {
                span.split(|c: char| c.is_whitespace() || c == '=' || c == '.')
                    .next()
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
            })
            .collect()
    }

    /// Whether a heading is the section of the top-level table `top`:
    /// `[server]`, `[plugins.NAME]` or `[[tools]]` in its text.
    fn is_section_of(title: &str, top: &str) -> bool {
        let title = title.replace('`', "");
        title.contains(&format!("[{top}]")) || title.contains(&format!("[{top}."))
    }

    /// What docs/configuration.md leaves out: top-level tables without a
    /// section, and keys no section of a table they are written under names.
    fn undocumented(schema: &Value, markdown: &str) -> Vec<String> {
        let sections = sections(markdown);
        let mentions: BTreeMap<String, BTreeSet<String>> = schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(|top| {
                let words = sections
                    .iter()
                    .filter(|(title, _)| is_section_of(title, top))
                    .flat_map(|(_, body)| mentioned(body))
                    .collect();
                (top.clone(), words)
            })
            .collect();
        let mut missing: Vec<String> = sections_missing(&mentions, &sections);
        for ((owner, key), tops) in schema_keys(schema).under {
            if !tops.iter().any(|top| mentions[top].contains(&key)) {
                let tables: Vec<String> = tops.iter().map(|t| format!("[{t}]")).collect();
                missing.push(format!("`{key}` ({owner}, under {})", tables.join(" or ")));
            }
        }
        missing
    }

    fn sections_missing(
        mentions: &BTreeMap<String, BTreeSet<String>>,
        sections: &[(String, String)],
    ) -> Vec<String> {
        mentions
            .keys()
            .filter(|top| !sections.iter().any(|(title, _)| is_section_of(title, top)))
            .map(|top| format!("[{top}]: no section (a heading naming `[{top}]`)"))
            .collect()
    }

    fn doc() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        std::fs::read_to_string(path).expect("docs/configuration.md")
    }

    #[test]
    fn every_table_and_key_is_in_the_configuration_doc() {
        let missing = undocumented(&schema(), &doc());
        assert!(
            missing.is_empty(),
            "docs/configuration.md does not mention:\n  {}",
            missing.join("\n  ")
        );
    }

    #[test]
    fn a_key_left_out_of_the_doc_is_named() {
        let schema = schema();
        let full = doc();
        // `max_calls` (of `instances`) is written only under [plugins.NAME].
        let cut = full.replace("`max_calls`", "max_calls");
        let missing = undocumented(&schema, &cut);
        assert!(
            missing.iter().any(|m| m.starts_with("`max_calls`")),
            "{missing:?}"
        );
        let no_kv = full.replace("### `[kv]`", "### kv");
        let missing = undocumented(&schema, &no_kv);
        assert!(
            missing.iter().any(|m| m.starts_with("[kv]: no section")),
            "{missing:?}"
        );
    }
}

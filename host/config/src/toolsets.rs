//! `[toolsets.NAME]`: named subsets of the catalog, each served at its own
//! endpoints (`/mcp/NAME`, `/toolsets/NAME/…`). This file owns the schema
//! and what `hangar check` refuses; the filter is the catalog's, the routes
//! the server's.

use schemars::JsonSchema;
use serde::Deserialize;

/// One toolset: globs (`*` any run, `?` one character) over the names of
/// tools and prompts and the URIs of resources and templates. What no glob
/// of a list matches is not in the toolset: an empty list means none.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsetConfig {
    /// Tool names, e.g. `["db.*", "weather.get"]`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Resource URIs and template URIs, e.g. `["demo://products/*"]`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Prompt names.
    #[serde(default)]
    pub prompts: Vec<String>,
    /// The auth check every call, read and listing through the toolset's
    /// endpoints passes first (`{ plugin = "...", policy = {...} }`), before
    /// a tool's own; a caller it refuses is shown nothing there.
    pub auth: Option<super::tools::AuthConfig>,
    /// The toolset's own OAuth resource (RFC 8707/9728), e.g.
    /// `https://tools.example.com/mcp/NAME`: its endpoints take only tokens
    /// minted for it, and its metadata is served at
    /// `/.well-known/oauth-protected-resource/mcp/NAME`. Needs `[oauth]`,
    /// whose issuer and settings it shares; unset, the toolset takes the
    /// tokens `[oauth]` takes.
    pub resource: Option<String>,
    /// What the toolset's endpoints list, as `[server] catalog` says it
    /// (`"full"`, `"meta"`, `"both"`, `"code"`); unset, the server's.
    pub catalog: Option<super::CatalogMode>,
}

/// What a toolset's name may be: it is a path segment.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok && name != "." && name != ".." {
        Ok(())
    } else {
        Err(format!(
            "[toolsets.{name}]: a toolset's name is letters, digits, '-', '_' and '.' (it is a path segment)"
        ))
    }
}

/// What `hangar check` refuses: a bad name, a `default_toolset` that names
/// no toolset, a `resource` that is not an absolute http(s) URL or that
/// nothing would check (no `[oauth]`).
pub fn validate(
    toolsets: &std::collections::BTreeMap<String, ToolsetConfig>,
    default_toolset: Option<&str>,
    oauth: bool,
) -> Result<(), String> {
    for (name, toolset) in toolsets {
        check_name(name)?;
        if let Some(resource) = &toolset.resource {
            let what = format!("[toolsets.{name}] resource");
            super::oauth::http_url(&what, resource)?;
            if resource.contains('#') {
                return Err(format!("{what}: a resource URI has no fragment (RFC 8707)"));
            }
            if !oauth {
                return Err(format!(
                    "{what}: needs an [oauth] section (its issuer mints the tokens)"
                ));
            }
        }
    }
    if let Some(name) = default_toolset
        && !toolsets.contains_key(name)
    {
        return Err(format!(
            "[server] default_toolset = {name:?}: no [toolsets.{name}] is defined"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn check(text: &str) -> Result<(), String> {
        let config = Config::parse(text).map_err(|e| e.to_string())?;
        config.validate_toolsets()
    }

    #[test]
    fn toolsets_parse_with_empty_lists_by_default() {
        let config = Config::parse(
            "[server]\ndefault_toolset = \"ops\"\n[toolsets.ops]\ntools = [\"db.*\", \"weather.get\"]\n[toolsets.docs]\nprompts = [\"*\"]\n",
        )
        .unwrap();
        let ops = &config.toolsets["ops"];
        assert_eq!(ops.tools, ["db.*", "weather.get"]);
        assert!(ops.resources.is_empty() && ops.prompts.is_empty());
        assert_eq!(config.toolsets["docs"].prompts, ["*"]);
        assert_eq!(config.server.default_toolset.as_deref(), Some("ops"));
        config.validate_toolsets().unwrap();
    }

    #[test]
    fn bad_toolsets_are_refused() {
        assert!(Config::parse("[toolsets.a]\ntool = [\"x\"]\n").is_err());
        let e = check("[toolsets.\"a/b\"]\ntools = [\"x\"]\n").unwrap_err();
        assert!(e.contains("path segment"), "{e}");
        let e = check("[server]\ndefault_toolset = \"nope\"\n[toolsets.a]\n").unwrap_err();
        assert!(e.contains("default_toolset"), "{e}");
        let e = check("[toolsets.a]\nresource = \"https://h/mcp/a\"\n").unwrap_err();
        assert!(e.contains("[oauth]"), "{e}");
        let oauth = "[oauth]\nissuer = \"https://id.example\"\nresource = \"https://h/mcp\"\n";
        check(&format!(
            "{oauth}[toolsets.a]\nresource = \"https://h/mcp/a\"\n"
        ))
        .unwrap();
        let e = check(&format!("{oauth}[toolsets.a]\nresource = \"h/mcp/a\"\n")).unwrap_err();
        assert!(e.contains("absolute"), "{e}");
    }
}

//! `[oauth]`: Hangar as an OAuth 2.1 resource server (MCP authorization,
//! 2025-11-25). This file owns the schema and what `hangar check` refuses;
//! the serving side (metadata, token checks) is the oauth module's.

use std::borrow::Cow;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

use super::tools::ToolConfig;

/// The resource server's settings. With this section set, every request
/// that reaches a tool, resource, prompt, upload or the OpenAPI document
/// (`/mcp`, `/uploads` and, unless `rest = "public"`, the REST surface)
/// needs a bearer token the issuer signed for `resource`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server (its `iss`); its metadata names the JWKS.
    pub issuer: String,
    /// The canonical URI of this server (RFC 8707/9728), e.g.
    /// `https://tools.example.com/mcp`; the expected audience by default.
    pub resource: String,
    /// Scopes clients may ask for; also the `scope` of a 401 challenge.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Where the signing keys are, when the issuer's metadata should not be asked.
    pub jwks_uri: Option<String>,
    /// The `aud` tokens must carry, when it is not `resource` (Auth0 API
    /// identifiers, Entra application ID URIs).
    pub audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default = "default_leeway", with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub leeway: Duration,
    /// Whether the REST surface (`/tools…`, `/resources…`, `/prompts…`,
    /// `/openapi.json`) needs a token too: `"protected"` (the default), or
    /// `"public"` to open it anonymously (which `hangar check` warns about).
    #[serde(default)]
    pub rest: RestAccess,
}

/// Who may use the REST surface under `[oauth]`. Fails closed: an operator
/// who opens it says so in words (`true`/`false` are read as
/// `"protected"`/`"public"`, the meanings they had before).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RestAccess {
    #[default]
    Protected,
    Public,
}

impl JsonSchema for RestAccess {
    fn schema_name() -> Cow<'static, str> {
        "RestAccess".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "string", "enum": ["protected", "public"] },
                { "type": "boolean", "description": "true: \"protected\", false: \"public\"" }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for RestAccess {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RestAccess, D::Error> {
        #[derive(Deserialize, JsonSchema)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Flag(true) => Ok(RestAccess::Protected),
            Written::Flag(false) => Ok(RestAccess::Public),
            Written::Word(w) if w == "protected" => Ok(RestAccess::Protected),
            Written::Word(w) if w == "public" => Ok(RestAccess::Public),
            Written::Word(w) => Err(serde::de::Error::custom(format!(
                "rest = {w:?}: expected \"protected\" or \"public\""
            ))),
        }
    }
}

fn default_leeway() -> Duration {
    Duration::from_secs(30)
}

impl OAuthConfig {
    /// The audience a token must name.
    pub fn expected_audience(&self) -> &str {
        self.audience.as_deref().unwrap_or(&self.resource)
    }

    /// What `hangar check` warns about without refusing it.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.rest == RestAccess::Public {
            warnings.push(
                "[oauth] rest = \"public\": /tools, /resources, /prompts and /openapi.json answer callers without a token"
                    .to_string(),
            );
        }
        warnings
    }

    /// What `hangar check` refuses: URLs that are not absolute http(s), a
    /// resource with a fragment, a tool scope that is not offered.
    pub fn validate(&self, tools: &[ToolConfig]) -> Result<(), String> {
        http_url("[oauth] issuer", &self.issuer)?;
        http_url("[oauth] resource", &self.resource)?;
        if self.resource.contains('#') {
            return Err("[oauth] resource: a resource URI has no fragment (RFC 8707)".into());
        }
        if let Some(jwks) = &self.jwks_uri {
            http_url("[oauth] jwks_uri", jwks)?;
        }
        if self.audience.as_deref().is_some_and(str::is_empty) {
            return Err("[oauth] audience: empty".into());
        }
        for scope in &self.scopes_supported {
            check_scope("[oauth] scopes_supported", scope)?;
        }
        for tool in tools {
            for scope in &tool.scopes {
                let what = format!("tool {}: scopes", tool.name);
                check_scope(&what, scope)?;
                if !self.scopes_supported.is_empty() && !self.scopes_supported.contains(scope) {
                    return Err(format!(
                        "{what}: {scope:?} is not in [oauth] scopes_supported"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Tool scopes mean nothing without `[oauth]`: refuse them rather than let a
/// tool look protected when it is not.
pub fn validate_without_oauth(tools: &[ToolConfig]) -> Result<(), String> {
    match tools.iter().find(|t| !t.scopes.is_empty()) {
        Some(t) => Err(format!(
            "tool {}: scopes need an [oauth] section (nothing would check them)",
            t.name
        )),
        None => Ok(()),
    }
}

pub(super) fn http_url(what: &str, url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{what}: {url:?} is not an absolute http(s) URL"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("{what}: {url:?} has no host"));
    }
    Ok(())
}

/// RFC 6749 scope-token: printable ASCII without space, `"` or `\`.
fn check_scope(what: &str, scope: &str) -> Result<(), String> {
    let ok = !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {scope:?} is not a valid scope token"))
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn check(text: &str) -> Result<(), String> {
        let config = Config::parse(text).map_err(|e| e.to_string())?;
        config.validate_oauth()
    }

    const BASE: &str = r#"
        [oauth]
        issuer = "https://login.example.com/realms/acme"
        resource = "https://tools.example.com/mcp"
        scopes_supported = ["tools:read", "tools:admin"]
    "#;

    #[test]
    fn a_full_section_parses_with_defaults() {
        let config = Config::parse(BASE).unwrap();
        let oauth = config.oauth.as_ref().unwrap();
        assert_eq!(oauth.expected_audience(), "https://tools.example.com/mcp");
        assert_eq!(oauth.leeway, std::time::Duration::from_secs(30));
        assert_eq!(oauth.rest, super::RestAccess::Protected);
        assert!(oauth.warnings().is_empty());
        assert!(oauth.jwks_uri.is_none());
        check(BASE).unwrap();
    }

    #[test]
    fn audience_leeway_and_rest_are_read() {
        let text = format!("{BASE}audience = \"api://acme\"\nleeway = \"5s\"\nrest = true\n");
        let config = Config::parse(&text).unwrap();
        let oauth = config.oauth.unwrap();
        assert_eq!(oauth.expected_audience(), "api://acme");
        assert_eq!(oauth.leeway, std::time::Duration::from_secs(5));
        assert_eq!(oauth.rest, super::RestAccess::Protected);
    }

    #[test]
    fn rest_is_opened_only_in_words_and_check_warns() {
        for (written, access) in [
            ("\"public\"", super::RestAccess::Public),
            ("false", super::RestAccess::Public),
            ("\"protected\"", super::RestAccess::Protected),
            ("true", super::RestAccess::Protected),
        ] {
            let config = Config::parse(&format!("{BASE}rest = {written}\n")).unwrap();
            let oauth = config.oauth.unwrap();
            assert_eq!(oauth.rest, access, "{written}");
            assert_eq!(
                oauth.warnings().len(),
                usize::from(access == super::RestAccess::Public)
            );
        }
        assert!(Config::parse(&format!("{BASE}rest = \"open\"\n")).is_err());
    }

    #[test]
    fn unknown_keys_and_missing_fields_are_refused() {
        assert!(Config::parse(&format!("{BASE}isuer = \"x\"\n")).is_err());
        assert!(Config::parse("[oauth]\nissuer = \"https://a\"\n").is_err());
    }

    #[test]
    fn urls_must_be_absolute_http() {
        let bad = BASE.replace("https://login.example.com/realms/acme", "login.example.com");
        assert!(check(&bad).unwrap_err().contains("issuer"));
        let bad = BASE.replace("https://tools.example.com/mcp", "https:///mcp");
        assert!(check(&bad).unwrap_err().contains("resource"));
        let bad = BASE.replace(
            "https://tools.example.com/mcp",
            "https://tools.example.com/mcp#x",
        );
        assert!(check(&bad).unwrap_err().contains("fragment"));
        let bad = format!("{BASE}jwks_uri = \"file:///etc/keys\"\n");
        assert!(check(&bad).unwrap_err().contains("jwks_uri"));
    }

    #[test]
    fn tool_scopes_must_be_offered() {
        let ok = format!("{BASE}[[tools]]\nname = \"refund\"\nscopes = [\"tools:admin\"]\n");
        check(&ok).unwrap();
        let bad = format!("{BASE}[[tools]]\nname = \"refund\"\nscopes = [\"tools:root\"]\n");
        assert!(check(&bad).unwrap_err().contains("scopes_supported"));
        let bad = format!("{BASE}[[tools]]\nname = \"refund\"\nscopes = [\"a b\"]\n");
        assert!(check(&bad).unwrap_err().contains("scope token"));
    }

    #[test]
    fn tool_scopes_without_oauth_are_refused() {
        let text = "[[tools]]\nname = \"refund\"\nscopes = [\"tools:admin\"]\n";
        assert!(check(text).unwrap_err().contains("[oauth]"));
        check("[[tools]]\nname = \"refund\"\n").unwrap();
    }
}

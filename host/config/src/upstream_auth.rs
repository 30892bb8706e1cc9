//! `[upstreams.NAME] auth`: an upstream called on the caller's behalf,
//! with the caller's OAuth access token exchanged (RFC 8693) or the
//! caller's value of a per-user provider; checked and filled in at load.

use schemars::JsonSchema;
use serde::Deserialize;

/// `[upstreams.NAME] auth`: `{ kind = "token-exchange", token_url,
/// client_id, client_secret, audience, resource, scopes }` or
/// `{ credential = "X" }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamAuthConfig {
    /// `token-exchange`: the caller's OAuth access token exchanged (RFC 8693).
    pub kind: Option<String>,
    /// The per-user provider whose value for the caller is the bearer.
    pub credential: Option<String>,
    /// The authorization server's token endpoint (token exchange).
    pub token_url: Option<String>,
    /// Hangar's client at that server (HTTP Basic); may hold `{{ env.VAR }}`.
    pub client_id: Option<String>,
    /// Its secret; usually `{{ env.VAR }}` or `{{ file./path }}`.
    pub client_secret: Option<String>,
    /// RFC 8693 `audience`: the upstream, as that server names it.
    pub audience: Option<String>,
    /// RFC 8707 `resource`: the upstream's URL, for servers that want one.
    pub resource: Option<String>,
    /// Scopes asked for the exchanged token.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `auth`, checked and filled in.
#[derive(Debug, Clone)]
pub enum ResolvedAuth {
    Exchange {
        token_url: String,
        client_id: String,
        client_secret: String,
        audience: Option<String>,
        resource: Option<String>,
        scopes: Vec<String>,
    },
    Credential(String),
}

impl UpstreamAuthConfig {
    pub(super) fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedAuth, String> {
        let fill = |key: &str, v: &Option<String>| -> Result<Option<String>, String> {
            v.as_deref()
                .map(|v| super::substitute_env(v, env).map_err(|e| format!("auth.{key}: {e}")))
                .transpose()
        };
        match (self.kind.as_deref(), &self.credential) {
            (None, Some(provider)) => {
                let extra = self.token_url.is_some()
                    || self.client_id.is_some()
                    || self.client_secret.is_some()
                    || self.audience.is_some()
                    || self.resource.is_some()
                    || !self.scopes.is_empty();
                if extra {
                    return Err("auth: credential takes no token exchange settings".into());
                }
                Ok(ResolvedAuth::Credential(provider.clone()))
            }
            (Some("token-exchange"), None) => {
                let token_url = fill("token_url", &self.token_url)?
                    .ok_or("auth: token exchange needs token_url")?;
                let parsed = url::Url::parse(&token_url)
                    .map_err(|_| "auth.token_url is not a valid URL".to_string())?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
                    return Err("auth.token_url must be an absolute http(s) URL".into());
                }
                Ok(ResolvedAuth::Exchange {
                    token_url,
                    client_id: fill("client_id", &self.client_id)?
                        .ok_or("auth: token exchange needs client_id")?,
                    client_secret: fill("client_secret", &self.client_secret)?.unwrap_or_default(),
                    audience: fill("audience", &self.audience)?,
                    resource: fill("resource", &self.resource)?,
                    scopes: self.scopes.clone(),
                })
            }
            (Some(kind), None) => Err(format!(
                "auth: unknown kind {kind:?} (\"token-exchange\", or credential = \"X\")"
            )),
            (Some(_), Some(_)) => {
                Err("auth: set kind = \"token-exchange\" or credential, not both".into())
            }
            (None, None) => Err(
                "auth: set kind = \"token-exchange\" (with token_url, client_id, …) or credential = \"X\""
                    .into(),
            ),
        }
    }
}

//! `[credentials]`: the providers whose tokens guests get through
//! `credentials.get(NAME)`, and the key per-user tokens are sealed with.
//!
//! Two kinds belong to the server (`static`, `oauth2-client-credentials`:
//! one value every caller shares) and two to each user (`oauth2-user`,
//! `user-key`: each caller connects their own account at `/connect/NAME`).
//! A per-user provider resolves by [`Source`] in turn: the caller's own
//! connection, a team's value chosen by a claim, the server-wide `default`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

/// `[credentials]`: `encryption_key` and the providers, by name.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct CredentialsConfig {
    /// The key users' tokens are sealed with at rest (AES-256-GCM): 32
    /// bytes, base64, usually `{{ env.VAR }}` or `{{ file./path }}` (make
    /// one with `openssl rand -base64 32`). Required when a provider is
    /// per-user; the same on every replica.
    pub encryption_key: Option<String>,
    /// The providers, by name (`[credentials.NAME]`).
    #[serde(flatten)]
    pub providers: BTreeMap<String, CredentialConfig>,
}

impl CredentialsConfig {
    /// Whether any provider is connected per user (and so needs the key,
    /// the kv store and `[server] public_url`).
    pub fn per_user(&self) -> bool {
        self.providers.values().any(CredentialConfig::is_per_user)
    }

    /// `encryption_key`, filled in from the environment or a file and
    /// decoded: exactly 32 bytes of base64 (standard or URL-safe alphabet,
    /// padded or not).
    pub fn encryption_key(&self) -> Result<[u8; 32], String> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let text = self
            .encryption_key
            .as_deref()
            .ok_or("[credentials] encryption_key is not set")?;
        let env = |var: &str| std::env::var(var).ok();
        let text = super::substitute_env(text, &env)
            .map_err(|e| format!("[credentials] encryption_key: {e}"))?;
        let text = text.trim().trim_end_matches('=');
        let bytes = (STANDARD.decode(format!(
            "{text:=<width$}",
            width = text.len().div_ceil(4) * 4
        )))
        .or_else(|_| {
            URL_SAFE.decode(format!(
                "{text:=<width$}",
                width = text.len().div_ceil(4) * 4
            ))
        })
        .map_err(|_| {
            "[credentials] encryption_key: not base64 (make one with `openssl rand -base64 32`)"
                .to_string()
        })?;
        bytes.try_into().map_err(|b: Vec<u8>| {
            format!(
                "[credentials] encryption_key: {} bytes; it must be 32 (make one with `openssl rand -base64 32`)",
                b.len()
            )
        })
    }
}

/// A `[credentials.NAME]` provider. Values may be `{{ env.VAR }}` or
/// `{{ file./path }}`; they never appear in logs or `hangar check`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum CredentialConfig {
    /// A fixed token or API key.
    #[serde(rename = "static")]
    Static {
        /// The token, usually `{{ env.VAR }}` or `{{ file./path }}`.
        value: String,
    },
    /// OAuth 2.0 client credentials: the host asks `token_url` for a token
    /// and shares it across calls until shortly before it expires.
    #[serde(rename = "oauth2-client-credentials")]
    OAuth2ClientCredentials {
        /// The authorization server's token endpoint.
        token_url: String,
        client_id: String,
        /// Usually `{{ env.VAR }}` or `{{ file./path }}`.
        client_secret: String,
        /// Scopes asked for with every token.
        #[serde(default)]
        scopes: Vec<String>,
    },
    /// Each user connects their own account at the provider: authorization
    /// code with PKCE (S256) and `state`, started at `/connect/NAME`; the
    /// access token is refreshed before it expires.
    #[serde(rename = "oauth2-user")]
    OAuth2User {
        /// The provider's authorization endpoint (where the user consents).
        authorize_url: String,
        /// The provider's token endpoint (code and refresh grants; HTTP
        /// Basic client authentication).
        token_url: String,
        client_id: String,
        /// Usually `{{ env.VAR }}` or `{{ file./path }}`.
        client_secret: String,
        /// Scopes asked for (a refresh token usually needs one, such as
        /// `offline_access`).
        #[serde(default)]
        scopes: Vec<String>,
        /// Extra query parameters of the authorization request, as some
        /// providers want (`prompt = "consent"`, `access_type = "offline"`).
        #[serde(default)]
        authorize_params: BTreeMap<String, String>,
        /// Asked with the new access token once connected: the `email`,
        /// `preferred_username` or `sub` it answers names the account.
        userinfo_url: Option<String>,
        /// Where the provider sends the user back; fixed, and registered at
        /// the provider. Default: `{public_url}/connect/NAME/callback`.
        redirect_uri: Option<String>,
        #[serde(flatten)]
        fallback: Fallback,
    },
    /// Each user pastes their own API key at `/connect/NAME`.
    #[serde(rename = "user-key")]
    UserKey {
        #[serde(flatten)]
        fallback: Fallback,
    },
}

impl CredentialConfig {
    pub fn is_per_user(&self) -> bool {
        matches!(
            self,
            CredentialConfig::OAuth2User { .. } | CredentialConfig::UserKey { .. }
        )
    }

    /// The config's name of the kind, as `kind =` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            CredentialConfig::Static { .. } => "static",
            CredentialConfig::OAuth2ClientCredentials { .. } => "oauth2-client-credentials",
            CredentialConfig::OAuth2User { .. } => "oauth2-user",
            CredentialConfig::UserKey { .. } => "user-key",
        }
    }
}

/// Where a per-user provider's value comes from when asked, in `sources`
/// order, and the team and server-wide values it may fall back on.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Fallback {
    /// The order sources are tried in; the first that has a value wins.
    #[serde(default = "Source::all")]
    pub sources: Vec<Source>,
    /// The claim of the caller's principal that names its team (`org`).
    pub team_claim: Option<String>,
    /// Team values, by the team claim's value (`acme = "{{ env.ACME }}"`).
    #[serde(default)]
    pub teams: BTreeMap<String, String>,
    /// The server-wide value, for callers with neither their own nor a
    /// team's.
    pub default: Option<String>,
}

/// One place a per-user provider's value may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The caller's own connection.
    User,
    /// The caller's team's value (`team_claim`, `teams`).
    Team,
    /// The provider's `default`.
    Default,
}

impl Source {
    fn all() -> Vec<Source> {
        vec![Source::User, Source::Team, Source::Default]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_sit_beside_the_key_and_per_user_kinds_take_fallbacks() {
        let parsed: CredentialsConfig = toml::from_str(
            r#"
            encryption_key = "k"
            [plain]
            kind = "static"
            value = "v"
            [notes]
            kind = "oauth2-user"
            authorize_url = "https://p/auth"
            token_url = "https://p/token"
            client_id = "c"
            client_secret = "s"
            sources = ["team", "user"]
            team_claim = "org"
            teams = { acme = "t" }
            [paste]
            kind = "user-key"
            "#,
        )
        .unwrap();
        assert_eq!(parsed.encryption_key.as_deref(), Some("k"));
        assert!(parsed.per_user());
        let CredentialConfig::OAuth2User { fallback, .. } = &parsed.providers["notes"] else {
            panic!("{parsed:?}");
        };
        assert_eq!(fallback.sources, [Source::Team, Source::User]);
        assert_eq!(fallback.teams["acme"], "t");
        let CredentialConfig::UserKey { fallback } = &parsed.providers["paste"] else {
            panic!("{parsed:?}");
        };
        assert_eq!(fallback.sources, Source::all());
        assert!(!parsed.providers["plain"].is_per_user());
    }

    #[test]
    fn the_encryption_key_is_32_bytes_of_base64() {
        let key = |k: &str| {
            CredentialsConfig {
                encryption_key: Some(k.into()),
                ..CredentialsConfig::default()
            }
            .encryption_key()
        };
        // 32 bytes: with padding, without, URL-safe.
        assert_eq!(
            key("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap()[31],
            31
        );
        assert_eq!(
            key("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8").unwrap()[1],
            1
        );
        assert!(key("__________________________________________8").is_ok());
        assert!(
            key("c2hvcnQ=")
                .unwrap_err()
                .contains("5 bytes; it must be 32")
        );
        assert!(
            key("not base64 at all!")
                .unwrap_err()
                .contains("not base64")
        );
    }

    #[test]
    fn a_misspelled_key_of_a_provider_is_refused() {
        let parsed = toml::from_str::<CredentialsConfig>(
            "[paste]\nkind = \"user-key\"\nteam_claims = \"org\"\n",
        );
        assert!(parsed.is_err(), "{parsed:?}");
        let parsed = toml::from_str::<CredentialsConfig>(
            "[plain]\nkind = \"static\"\nvalue = \"v\"\nx = 1\n",
        );
        assert!(parsed.is_err(), "{parsed:?}");
    }
}

//! Who is calling: the subject and claims the auth stage found.

use std::sync::Arc;

use serde::Serialize;

/// Who is calling, once the auth stage has said so.
#[derive(Debug, Clone, Serialize)]
pub struct Principal {
    pub subject: String,
    pub claims: serde_json::Value,
    /// The OAuth access token the door verified for it, if it came with
    /// one: kept only to exchange it for an upstream's (RFC 8693). Never
    /// serialized (mappers, guests and logs see the principal without it).
    #[serde(skip)]
    pub access_token: Option<AccessToken>,
}

impl Principal {
    pub fn new(subject: impl Into<String>, claims: serde_json::Value) -> Principal {
        Principal {
            subject: subject.into(),
            claims,
            access_token: None,
        }
    }
}

/// A caller's access token: shown by `Debug` as `AccessToken(…)`, so no
/// log line of a principal holds it.
#[derive(Clone)]
pub struct AccessToken(Arc<str>);

impl AccessToken {
    pub fn new(token: &str) -> AccessToken {
        AccessToken(token.into())
    }

    /// The token itself, for the exchange that needs it.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(…)")
    }
}

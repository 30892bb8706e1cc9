//! `Jwks`: the authorization server's signing keys, as the resource server
//! keeps them. It owns where the keys are (`jwks_uri`, from config or the
//! issuer's metadata), the parsed keys by `kid`, and when to fetch again:
//! when the set expires (its `max-age`, else [`DEFAULT_TTL`]) and when a
//! token names a `kid` it does not know — at most once per
//! [`MIN_REFRESH`], so tokens with made-up key ids cannot make Hangar hammer
//! the issuer.

use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::Jwk;
use serde_json::Value;
use tokio::sync::Mutex;

use super::fetch::Fetcher;

/// How long a key set is kept when its answer says nothing.
const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// Bounds on a `max-age` taken from the issuer.
const MIN_TTL: Duration = Duration::from_secs(60);
const MAX_TTL: Duration = Duration::from_secs(86_400);
/// The shortest time between two fetches caused by unknown key ids.
pub const MIN_REFRESH: Duration = Duration::from_secs(10);

/// One usable verification key.
#[derive(Clone)]
pub struct Key {
    pub kid: Option<String>,
    pub key: DecodingKey,
    /// The key's family and algorithm hint: `RSA`, `EC`, `OKP`.
    pub kty: String,
    pub alg: Option<String>,
}

struct State {
    jwks_uri: Option<String>,
    keys: Vec<Key>,
    expires: Option<Instant>,
    last_fetch: Option<Instant>,
}

/// The key cache of one issuer.
pub struct Jwks {
    issuer: String,
    fetcher: Fetcher,
    state: Mutex<State>,
}

impl Jwks {
    pub fn new(issuer: &str, jwks_uri: Option<&str>) -> Jwks {
        Jwks {
            issuer: issuer.to_string(),
            fetcher: Fetcher::new(),
            state: Mutex::new(State {
                jwks_uri: jwks_uri.map(str::to_string),
                keys: Vec::new(),
                expires: None,
                last_fetch: None,
            }),
        }
    }

    /// The keys that may have signed a token with `kid`: the one with that
    /// id, or every key when the token names none. Fetches first when the
    /// set expired, or when `kid` is unknown and the last fetch is old enough.
    /// One fetch at a time: concurrent callers wait for it and share it.
    pub async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<Key>, String> {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let expired = state.expires.is_none_or(|e| now >= e);
        let unknown =
            kid.is_some_and(|k| !state.keys.iter().any(|key| key.kid.as_deref() == Some(k)));
        let may_refresh = state
            .last_fetch
            .is_none_or(|t| now.duration_since(t) >= MIN_REFRESH);
        if (expired || unknown) && may_refresh {
            if let Err(e) = self.refresh(&mut state).await {
                // Keys still held keep working while the issuer is away; the
                // next attempt waits [`MIN_REFRESH`] like any other.
                if state.keys.is_empty() {
                    return Err(e);
                }
                tracing::warn!(target: "hangar::oauth", "cannot refresh the signing keys: {e}");
            }
        } else if state.keys.is_empty() {
            return Err("the issuer's signing keys could not be fetched (retried shortly)".into());
        }
        Ok(state
            .keys
            .iter()
            .filter(|key| kid.is_none() || key.kid.as_deref() == kid)
            .cloned()
            .collect())
    }

    async fn refresh(&self, state: &mut State) -> Result<(), String> {
        state.last_fetch = Some(Instant::now());
        let uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let fetched = self.fetcher.get_json(&uri).await?;
        let keys = parse_keys(&fetched.json)?;
        let ttl = fetched
            .max_age
            .map_or(DEFAULT_TTL, |t| t.clamp(MIN_TTL, MAX_TTL));
        tracing::info!(target: "hangar::oauth", jwks_uri = %uri, keys = keys.len(), "signing keys fetched");
        state.keys = keys;
        state.expires = Some(Instant::now() + ttl);
        Ok(())
    }

    /// `jwks_uri` from the issuer's metadata: OpenID discovery first, then
    /// RFC 8414 (both the suffixed and the path-inserted forms). The
    /// metadata must name this issuer.
    async fn discover(&self) -> Result<String, String> {
        let mut tried = Vec::new();
        for url in metadata_urls(&self.issuer) {
            match self.fetcher.get_json(&url).await {
                Ok(f) => {
                    let issuer = f.json.get("issuer").and_then(Value::as_str);
                    if issuer != Some(self.issuer.as_str()) {
                        return Err(format!(
                            "{url} names issuer {issuer:?}, not {:?}",
                            self.issuer
                        ));
                    }
                    return f
                        .json
                        .get("jwks_uri")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| format!("{url} has no jwks_uri"));
                }
                Err(e) => tried.push(e),
            }
        }
        Err(format!("no issuer metadata: {}", tried.join("; ")))
    }
}

/// Where an issuer's metadata may be, in the order asked.
pub fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut urls = vec![format!("{trimmed}/.well-known/openid-configuration")];
    // RFC 8414: the well-known segment goes between the host and the path.
    let (scheme, rest) = trimmed.split_once("://").unwrap_or(("https", trimmed));
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    urls.push(format!(
        "{scheme}://{host}/.well-known/oauth-authorization-server{path}"
    ));
    if !path.is_empty() {
        urls.push(format!(
            "{scheme}://{host}/.well-known/openid-configuration{path}"
        ));
    }
    urls
}

/// The signature keys of a JWK set; encryption keys and keys this build
/// cannot use are skipped (one odd key does not take the others down).
pub fn parse_keys(set: &Value) -> Result<Vec<Key>, String> {
    let keys = set
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("the key set has no \"keys\" array")?;
    Ok(keys
        .iter()
        .filter(|k| {
            k.get("use")
                .and_then(Value::as_str)
                .is_none_or(|u| u == "sig")
        })
        .filter_map(|k| {
            let jwk: Jwk = serde_json::from_value(k.clone()).ok()?;
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            Some(Key {
                kid: k.get("kid").and_then(Value::as_str).map(str::to_string),
                key,
                kty: k.get("kty").and_then(Value::as_str)?.to_string(),
                alg: k.get("alg").and_then(Value::as_str).map(str::to_string),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_urls_cover_oidc_and_rfc8414() {
        assert_eq!(
            metadata_urls("https://login.example.com/realms/acme"),
            [
                "https://login.example.com/realms/acme/.well-known/openid-configuration",
                "https://login.example.com/.well-known/oauth-authorization-server/realms/acme",
                "https://login.example.com/.well-known/openid-configuration/realms/acme",
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example.com/"),
            [
                "https://as.example.com/.well-known/openid-configuration",
                "https://as.example.com/.well-known/oauth-authorization-server",
            ]
        );
    }

    #[test]
    fn encryption_and_unusable_keys_are_skipped() {
        let set = json!({ "keys": [
            { "kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
            { "kty": "OKP", "crv": "Ed25519", "kid": "enc", "use": "enc", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
            { "kty": "weird", "kid": "w" },
        ]});
        let keys = parse_keys(&set).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("ed"));
        assert!(parse_keys(&json!({})).is_err());
    }
}

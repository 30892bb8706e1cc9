//! `Jwks`: the authorization server's signing keys, as the resource server
//! keeps them. It owns where the keys are (`jwks_uri`, from config or the
//! issuer's metadata), the parsed keys by `kid`, and when to fetch again:
//! when the set expires (its `max-age`, else [`DEFAULT_TTL`]) and when a
//! token names a `kid` it does not know — at most once per
//! [`MIN_REFRESH`], so tokens with made-up key ids cannot make Hangar hammer
//! the issuer.
//!
//! A token check never waits for the issuer once keys are held: the keys
//! are read from an [`ArcSwap`], and a refresh runs in the background, one
//! at a time, while the keys held keep verifying (a fetch may take 10 s, 30 s
//! with discovery; a slow issuer must not stall every request behind it). A
//! token naming a `kid` not yet fetched is refused while its refresh runs.
//! Only the very first fetch, with no keys at all, is awaited — by every
//! caller that arrives during it, sharing that one fetch.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::Jwk;
use serde_json::Value;

use super::fetch::Fetcher;

/// How long a key set is kept when its answer says nothing.
const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// Bounds on a `max-age` taken from the issuer.
const MIN_TTL: Duration = Duration::from_secs(60);
const MAX_TTL: Duration = Duration::from_secs(86_400);
/// The shortest time between two fetches (after an unknown key id, or
/// while the issuer fails to answer an expired set's refresh).
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

/// The keys in use and when they expire; replaced whole by a refresh.
#[derive(Default)]
struct Held {
    keys: Vec<Key>,
    expires: Option<Instant>,
}

/// A fetch in progress, awaitable by any number of callers.
type Refresh = Shared<BoxFuture<'static, Result<(), String>>>;

/// When the last fetch started, and the one running now.
#[derive(Default)]
struct Flight {
    last: Option<Instant>,
    running: Option<Refresh>,
}

struct Inner {
    issuer: String,
    fetcher: Fetcher,
    /// From config, or found by discovery on the first fetch.
    jwks_uri: OnceLock<String>,
    held: ArcSwap<Held>,
    /// Locked only to look at or start a fetch, never across one.
    flight: Mutex<Flight>,
    min_refresh: Duration,
}

/// The key cache of one issuer (a clone shares it).
#[derive(Clone)]
pub struct Jwks {
    inner: Arc<Inner>,
}

impl Jwks {
    /// `tls`: the roots an `https://` issuer is verified against.
    pub fn new(issuer: &str, jwks_uri: Option<&str>, tls: rustls::ClientConfig) -> Jwks {
        Jwks::with_min_refresh(issuer, jwks_uri, tls, MIN_REFRESH)
    }

    fn with_min_refresh(
        issuer: &str,
        jwks_uri: Option<&str>,
        tls: rustls::ClientConfig,
        min_refresh: Duration,
    ) -> Jwks {
        let known = OnceLock::new();
        if let Some(uri) = jwks_uri {
            let _ = known.set(uri.to_string());
        }
        Jwks {
            inner: Arc::new(Inner {
                issuer: issuer.to_string(),
                fetcher: Fetcher::new(tls),
                jwks_uri: known,
                held: ArcSwap::from_pointee(Held::default()),
                flight: Mutex::new(Flight::default()),
                min_refresh,
            }),
        }
    }

    /// The keys that may have signed a token with `kid`: the one with that
    /// id, or every key when the token names none. With keys held, answers
    /// at once from them, and starts a background refresh when the set
    /// expired or `kid` is unknown (so an unknown `kid` gets no key now).
    /// With none held yet, waits for the fetch every such caller shares.
    pub async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<Key>, String> {
        let mut held = self.inner.held.load_full();
        if held.keys.is_empty() {
            let Some(fetch) = self.inner.refresh_once() else {
                return Err(
                    "the issuer's signing keys could not be fetched (retried shortly)".into(),
                );
            };
            fetch.await?;
            held = self.inner.held.load_full();
        } else {
            let expired = held.expires.is_none_or(|e| Instant::now() >= e);
            let unknown =
                kid.is_some_and(|k| !held.keys.iter().any(|key| key.kid.as_deref() == Some(k)));
            if expired || unknown {
                // Not awaited: the keys held answer this token.
                let _ = self.inner.refresh_once();
            }
        }
        Ok(held
            .keys
            .iter()
            .filter(|key| kid.is_none() || key.kid.as_deref() == kid)
            .cloned()
            .collect())
    }
}

impl Inner {
    /// The fetch in progress, or a new one when the last started at least
    /// `min_refresh` ago (`None`: too soon). A new fetch runs in its own
    /// task, so it finishes (and its keys serve later tokens) even when
    /// nobody waits for it.
    fn refresh_once(self: &Arc<Inner>) -> Option<Refresh> {
        let mut flight = self.flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = &flight.running {
            return Some(running.clone());
        }
        let now = Instant::now();
        if flight
            .last
            .is_some_and(|t| now.duration_since(t) < self.min_refresh)
        {
            return None;
        }
        flight.last = Some(now);
        let inner = self.clone();
        let fetch = async move {
            let outcome = inner.refresh().await;
            if let Err(e) = &outcome {
                // Keys still held keep working while the issuer is away; the
                // next attempt waits `min_refresh` like any other.
                tracing::warn!(target: "hangar::oauth", "cannot refresh the signing keys: {e}");
            }
            inner
                .flight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .running = None;
            outcome
        }
        .boxed()
        .shared();
        flight.running = Some(fetch.clone());
        tokio::spawn(fetch.clone());
        Some(fetch)
    }

    async fn refresh(&self) -> Result<(), String> {
        let uri = match self.jwks_uri.get() {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                let _ = self.jwks_uri.set(uri.clone());
                uri
            }
        };
        let fetched = self.fetcher.get_json(&uri).await?;
        let keys = parse_keys(&fetched.json)?;
        let ttl = fetched
            .max_age
            .map_or(DEFAULT_TTL, |t| t.clamp(MIN_TTL, MAX_TTL));
        tracing::info!(target: "hangar::oauth", jwks_uri = %uri, keys = keys.len(), "signing keys fetched");
        self.held.store(Arc::new(Held {
            keys,
            expires: Some(Instant::now() + ttl),
        }));
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

    /// No roots: the tests' issuers speak plain HTTP.
    fn tls() -> rustls::ClientConfig {
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
    }

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

    const X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

    /// A JWK set of Ed25519 keys named `kids` (one public key, several ids).
    fn set(kids: &[&str]) -> Value {
        let keys: Vec<Value> = kids
            .iter()
            .map(|k| json!({ "kty": "OKP", "crv": "Ed25519", "kid": k, "x": X }))
            .collect();
        json!({ "keys": keys })
    }

    /// A real HTTP issuer serving `keys` at `/jwks`: counts its requests,
    /// and holds every answer while `hang` is true.
    struct Issuer {
        keys: Mutex<Value>,
        fetches: std::sync::atomic::AtomicUsize,
        hang: tokio::sync::watch::Sender<bool>,
        delay: Duration,
    }

    impl Issuer {
        async fn start(kids: &[&str], delay: Duration) -> (Arc<Issuer>, String) {
            use axum::routing::get;
            let issuer = Arc::new(Issuer {
                keys: Mutex::new(set(kids)),
                fetches: Default::default(),
                hang: tokio::sync::watch::channel(false).0,
                delay,
            });
            let serve = |axum::extract::State(i): axum::extract::State<Arc<Issuer>>| async move {
                i.fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(i.delay).await;
                let _ = i.hang.subscribe().wait_for(|hang| !*hang).await;
                axum::Json(i.keys.lock().unwrap().clone())
            };
            let app = axum::Router::new()
                .route("/jwks", get(serve))
                .with_state(issuer.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/jwks", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await });
            (issuer, url)
        }

        fn fetches(&self) -> usize {
            self.fetches.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    /// `keys_for`, which must answer while the issuer hangs. A hanging
    /// issuer answers only when the test lets it, so an answer at all shows
    /// the call did not wait for it; the 30 s are against a hang of the
    /// test, not a bound on how soon it answers.
    async fn now(jwks: &Jwks, kid: &str) -> Vec<Option<String>> {
        tokio::time::timeout(Duration::from_secs(30), jwks.keys_for(Some(kid)))
            .await
            .expect("answered without waiting for the issuer")
            .unwrap()
            .into_iter()
            .map(|k| k.kid)
            .collect()
    }

    /// Waits for the issuer to have been asked `n` times (the refresh's
    /// request reaching it), then checks it was not asked more.
    async fn fetched(issuer: &Issuer, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while issuer.fetches() < n {
            assert!(
                Instant::now() < deadline,
                "the refresh never reached the issuer"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(issuer.fetches(), n);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_callers_share_one_fetch() {
        let (issuer, url) = Issuer::start(&["a"], Duration::from_millis(300)).await;
        let jwks = Jwks::new("http://issuer.test", Some(&url), tls());
        let all = futures::future::join_all((0..8).map(|_| jwks.keys_for(Some("a")))).await;
        for keys in all {
            assert_eq!(keys.unwrap().len(), 1);
        }
        assert_eq!(issuer.fetches(), 1);
        // An unknown kid soon after: the keys held answer, and no fetch
        // starts before MIN_REFRESH.
        for _ in 0..5 {
            assert!(now(&jwks, "made-up").await.is_empty());
        }
        assert_eq!(issuer.fetches(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hanging_refresh_stalls_no_token_and_runs_once() {
        let (issuer, url) = Issuer::start(&["a"], Duration::ZERO).await;
        let jwks = Jwks::with_min_refresh("http://issuer.test", Some(&url), tls(), Duration::ZERO);
        assert_eq!(now(&jwks, "a").await, [Some("a".to_string())]);
        issuer.hang.send_replace(true);
        *issuer.keys.lock().unwrap() = set(&["a", "b"]);
        // An unknown kid starts a refresh and is answered at once (no key):
        // the answer comes while that refresh is still in flight (had the
        // call waited for it, it would have ended, by the issuer's answer
        // or the fetch's own timeout). The known one keeps verifying; the
        // refresh is not started twice.
        assert!(now(&jwks, "b").await.is_empty());
        assert!(
            jwks.inner.flight.lock().unwrap().running.is_some(),
            "answered only once the refresh had ended"
        );
        for _ in 0..5 {
            assert_eq!(now(&jwks, "a").await, [Some("a".to_string())]);
            assert!(now(&jwks, "b").await.is_empty());
        }
        fetched(&issuer, 2).await;
        // The issuer answers: the new key is there for later tokens.
        issuer.hang.send_replace(false);
        let deadline = Instant::now() + Duration::from_secs(30);
        while now(&jwks, "b").await.is_empty() {
            assert!(Instant::now() < deadline, "the refresh never landed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_expired_set_is_refreshed_behind_the_keys_it_holds() {
        let (issuer, url) = Issuer::start(&["a"], Duration::ZERO).await;
        let jwks = Jwks::new("http://issuer.test", Some(&url), tls());
        assert_eq!(now(&jwks, "a").await, [Some("a".to_string())]);
        // The set expired long ago and its refresh hangs: the old key verifies.
        let old = jwks.inner.held.load_full();
        jwks.inner.held.store(Arc::new(Held {
            keys: old.keys.clone(),
            expires: Some(Instant::now() - Duration::from_secs(1)),
        }));
        jwks.inner.flight.lock().unwrap().last = None;
        issuer.hang.send_replace(true);
        assert_eq!(now(&jwks, "a").await, [Some("a".to_string())]);
        fetched(&issuer, 2).await;
        issuer.hang.send_replace(false);
    }
}

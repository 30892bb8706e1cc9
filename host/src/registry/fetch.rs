//! The pull side of the OCI distribution API (the `/v2/` challenge and its
//! token, manifests, blobs) with memory bounded while the bytes arrive.
//!
//! oci-client reads every body whole (`bytes()`: manifests, error answers,
//! tokens) before anyone can look at its size, and its blob pull keeps
//! writing past the size the manifest declares; a registry that streams
//! without end would grow the host until it dies. So pulls go through
//! reqwest here: manifests, tokens and error answers through
//! `http_body_util::Limited`, blobs counted and hashed chunk by chunk and cut
//! off at their declared size. oci-client stays for `hangar push` and for
//! its types (`Reference`, manifests, error envelopes), so the errors read
//! as they did.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

use http_body_util::{BodyExt, LengthLimitError, Limited};
use oci_client::errors::{OciDistributionError as E, OciEnvelope};
use oci_client::token_cache::RegistryToken;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, WWW_AUTHENTICATE};

use super::*;

/// A manifest (image manifest, index, signature manifest) larger than this
/// is refused while it is read. Real ones are a few KiB; this leaves room
/// for large annotations.
pub(super) const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// A bearer token's answer larger than this is refused while it is read.
const MAX_TOKEN_BYTES: usize = 64 << 10;
/// Of an error answer, this much is read for its message; the rest is dropped.
const MAX_ERROR_BYTES: usize = 64 << 10;

/// Why a read from the registry failed.
pub(super) enum Failure {
    /// What the HTTP client or the registry said.
    Http(E),
    /// The registry sent something refused (too much, the wrong bytes).
    Refused(String),
}

/// A registry client whose every read is bounded.
pub(super) struct Registry {
    http: reqwest::Client,
    registries: RegistriesConfig,
    /// The `Authorization` for each `registry/repository`, once its
    /// challenge was met (`None`: anonymous).
    authz: Mutex<HashMap<String, Option<HeaderValue>>>,
}

impl Registry {
    pub(super) fn new(registries: &RegistriesConfig) -> Result<Registry, String> {
        // As oci-client builds its own client (`pull::client`), so TLS and
        // timeouts are those `hangar push` has.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("hangar/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the registry client: {e}"))?;
        Ok(Registry {
            http,
            registries: registries.clone(),
            authz: Mutex::default(),
        })
    }

    fn base(&self, reference: &Reference) -> String {
        let registry = reference.resolve_registry();
        let scheme = if self.registries.insecure.iter().any(|r| r == registry) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{registry}/v2/")
    }

    /// A failure as a pull error: unreachable (a cached copy may serve) or
    /// refused, worded as `explain` words the client's errors.
    pub(super) fn pull_error(&self, reference: &Reference, f: Failure) -> PullError {
        match f {
            Failure::Refused(why) => PullError::Refused(why),
            Failure::Http(e) => {
                let registry = reference.resolve_registry();
                let insecure = self.registries.insecure.iter().any(|r| r == registry);
                let text = explain(&e, registry, insecure);
                if unreachable(&e) {
                    PullError::Unreachable(text)
                } else {
                    PullError::Refused(text)
                }
            }
        }
    }

    /// The `Authorization` for pulling from `reference`'s repository: none
    /// without a challenge, the credentials for a Basic one, a bearer token
    /// fetched from the realm of a Bearer one (as oci-client does).
    async fn authorization(&self, reference: &Reference) -> Result<Option<HeaderValue>, Failure> {
        let registry = reference.resolve_registry();
        let key = format!("{registry}/{}", reference.repository());
        if let Some(known) = self.authz.lock().unwrap().get(&key) {
            return Ok(known.clone());
        }
        let auth = auth_for(&self.registries, registry).map_err(Failure::Refused)?;
        let header = |v: String| HeaderValue::from_str(&v).ok();
        let basic = |user: &str, password: &str| {
            use base64::Engine;
            let pair = format!("{user}:{password}");
            header(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ))
        };
        let value = match &auth {
            RegistryAuth::Bearer(token) => header(format!("Bearer {token}")),
            _ => {
                let ping = self
                    .http
                    .get(self.base(reference))
                    .send()
                    .await
                    .map_err(|e| Failure::Http(E::RequestError(e)))?;
                let challenge = ping
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string);
                // The ping's body is never read: dropped with the answer.
                drop(ping);
                match challenge.as_deref().map(bearer_challenge) {
                    None => None,
                    Some(None) => match &auth {
                        RegistryAuth::Basic(user, password) => basic(user, password),
                        _ => None,
                    },
                    Some(Some((realm, service))) => {
                        let token = self.token(reference, &auth, &realm, service).await?;
                        header(format!("Bearer {token}"))
                    }
                }
            }
        };
        self.authz.lock().unwrap().insert(key, value.clone());
        Ok(value)
    }

    /// A bearer token from `realm` for pulling `reference`'s repository.
    async fn token(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        realm: &str,
        service: Option<String>,
    ) -> Result<String, Failure> {
        let mut url = reqwest::Url::parse(realm)
            .map_err(|e| Failure::Http(E::UrlParseError(format!("token realm {realm:?}: {e}"))))?;
        url.query_pairs_mut().append_pair(
            "scope",
            &format!("repository:{}:pull", reference.repository()),
        );
        if let Some(s) = service {
            url.query_pairs_mut().append_pair("service", &s);
        }
        let mut request = self.http.get(url);
        if let RegistryAuth::Basic(user, password) = auth {
            request = request.basic_auth(user, Some(password));
        }
        let answer = request
            .send()
            .await
            .map_err(|e| Failure::Http(E::RequestError(e)))?;
        let status = answer.status();
        let body = read_limited(answer, MAX_TOKEN_BYTES, "the registry's token answer").await?;
        if status != StatusCode::OK {
            return Err(Failure::Http(E::AuthenticationFailure(
                String::from_utf8_lossy(&body).into_owned(),
            )));
        }
        let token: RegistryToken = serde_json::from_slice(&body)
            .map_err(|e| Failure::Http(E::RegistryTokenDecodeError(e.to_string())))?;
        Ok(token.token().to_string())
    }

    async fn get(
        &self,
        reference: &Reference,
        url: String,
        accept: Option<&str>,
    ) -> Result<reqwest::Response, Failure> {
        let mut request = self.http.get(&url);
        if let Some(authz) = self.authorization(reference).await? {
            // reqwest drops it on a redirect to another host (a blob store).
            request = request.header(AUTHORIZATION, authz);
        }
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        let answer = request
            .send()
            .await
            .map_err(|e| Failure::Http(E::RequestError(e)))?;
        let status = answer.status();
        if status == StatusCode::OK {
            return Ok(answer);
        }
        let body = read_limited(answer, MAX_ERROR_BYTES, "an error answer")
            .await
            .unwrap_or_default();
        Err(Failure::Http(registry_error(status, &body, url)))
    }

    /// The raw manifest `reference` names, refused past [`MAX_MANIFEST_BYTES`].
    pub(super) async fn manifest(
        &self,
        reference: &Reference,
        accepted: &[&str],
    ) -> Result<Vec<u8>, Failure> {
        let at = reference
            .digest()
            .or(reference.tag())
            .unwrap_or("latest")
            .to_string();
        let url = format!(
            "{}{}/manifests/{at}",
            self.base(reference),
            reference.repository()
        );
        let answer = self.get(reference, url, Some(&accepted.join(", "))).await?;
        read_limited(answer, MAX_MANIFEST_BYTES, "the manifest").await
    }

    /// Streams the blob `digest` of `reference`'s repository into `out`,
    /// `what` naming it in errors: refused as soon as more than `size`
    /// bytes arrive, and unless exactly `size` bytes hashing to `digest` do.
    pub(super) async fn blob(
        &self,
        reference: &Reference,
        (digest, size): (&str, i64),
        what: &str,
        out: &mut (dyn Write + Send),
    ) -> Result<(), Failure> {
        let size = u64::try_from(size).unwrap_or(0);
        let url = format!(
            "{}{}/blobs/{digest}",
            self.base(reference),
            reference.repository()
        );
        let mut answer = self.get(reference, url, None).await?;
        let over = || {
            Failure::Refused(format!(
                "{what} {digest}: the registry sent more than the {size} bytes the manifest declares"
            ))
        };
        if answer.content_length().is_some_and(|n| n > size) {
            return Err(over());
        }
        let mut hasher = Sha256::new();
        let mut got = 0u64;
        let io = |e: std::io::Error| Failure::Refused(format!("{what} {digest}: {e}"));
        while let Some(chunk) = answer
            .chunk()
            .await
            .map_err(|e| Failure::Http(E::RequestError(e)))?
        {
            got += chunk.len() as u64;
            if got > size {
                return Err(over());
            }
            hasher.update(&chunk);
            out.write_all(&chunk).map_err(io)?;
        }
        if got < size {
            return Err(Failure::Refused(format!(
                "{what} {digest}: the registry sent {got} bytes, the manifest declares {size}"
            )));
        }
        let hashed = format!("sha256:{}", hex::encode(hasher.finalize()));
        if hashed != digest {
            return Err(Failure::Refused(format!(
                "{what} {digest}: digest mismatch: expected {digest}, got {hashed}"
            )));
        }
        out.flush().map_err(io)
    }
}

/// Reads at most `limit` bytes of `answer`'s body; more is refused.
async fn read_limited(
    answer: reqwest::Response,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, Failure> {
    let body = http::Response::from(answer).into_body();
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(Failure::Refused(format!(
            "{what} is larger than {} KiB",
            limit >> 10
        ))),
        Err(e) => match e.downcast::<reqwest::Error>() {
            Ok(e) => Err(Failure::Http(E::RequestError(*e))),
            Err(e) => Err(Failure::Refused(format!("{what}: {e}"))),
        },
    }
}

/// A registry's answer other than 200, as oci-client words it.
fn registry_error(status: StatusCode, body: &[u8], url: String) -> E {
    let message = || String::from_utf8_lossy(body).into_owned();
    match status {
        StatusCode::UNAUTHORIZED => E::UnauthorizedError { url },
        s if s.is_success() => E::SpecViolationError(format!(
            "Expected HTTP Status {}, got {s} instead",
            StatusCode::OK
        )),
        s if s.is_client_error() => match serde_json::from_slice::<OciEnvelope>(body) {
            Ok(envelope) => E::RegistryError { envelope, url },
            Err(_) => E::ServerError {
                code: s.as_u16(),
                url,
                message: message(),
            },
        },
        s => E::ServerError {
            code: s.as_u16(),
            url,
            message: message(),
        },
    }
}

/// The realm and service of a `WWW-Authenticate` Bearer challenge; `None`
/// for any other scheme.
fn bearer_challenge(header: &str) -> Option<(String, Option<String>)> {
    http_auth::parser::ChallengeParser::new(header)
        .filter_map(Result::ok)
        .find(|c| c.scheme.eq_ignore_ascii_case("Bearer"))
        .and_then(|c| {
            let param = |name: &str| {
                c.params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            Some((param("realm")?, param("service")))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read_and_others_are_not() {
        let (realm, service) = bearer_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example""#,
        )
        .unwrap();
        assert_eq!(realm, "https://auth.example/token");
        assert_eq!(service.as_deref(), Some("registry.example"));
        assert!(bearer_challenge(r#"Basic realm="hangar-tests""#).is_none());
        assert!(bearer_challenge("Bearer service=\"x\"").is_none());
    }
}

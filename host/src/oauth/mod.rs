//! Hangar as an OAuth 2.1 resource server, as the MCP authorization spec
//! (2025-11-25) asks of an HTTP server: Protected Resource Metadata
//! (RFC 9728, [`metadata`]), a bearer token on every protected request
//! checked natively ([`token`], keys from [`jwks`]), and the challenges a
//! client discovers the authorization server from.
//!
//! A personal token (`hgr_…`, `hangar_core::accounts::Tokens`) is taken at the
//! same door, as the principal it was made for.
//!
//! This module sits with the surfaces: [`protect`] wraps a surface's router
//! in a middleware that answers 401 itself, takes the `Authorization` header
//! off the request (no plugin, mapper or log line ever sees the token) and
//! hands the surface the token's [`Principal`] as a request extension. The
//! pipeline's `scopes` check stays transport-neutral; a surface turns its
//! refusal into 403 with `WWW-Authenticate: Bearer error="insufficient_scope"`,
//! and the middleware adds `resource_metadata` to that challenge.

mod fetch;
pub mod jwks;
pub mod metadata;
pub mod token;

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::header::{AUTHORIZATION, CONNECTION, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use crate::pipeline::Door;
use hangar_config::{OAuthConfig, RestAccess};
use hangar_core::accounts::{TokenRefusal, Tokens};
use hangar_core::call::AccessToken;
use hangar_core::call::Principal;

/// The resource server of one config: its settings, its issuer's keys, and
/// the metadata URL its challenges name. Built once per app; shared by the
/// middleware of every protected surface.
pub struct ResourceServer {
    config: OAuthConfig,
    jwks: jwks::Jwks,
    metadata_url: String,
    /// Counts refused tokens per client; a client over its allowance is
    /// answered 429 before its token is even parsed.
    door: Arc<Door>,
    /// Personal tokens (`hgr_…`), taken at this door as access tokens are.
    tokens: Tokens,
}

/// What a client refused with [`Refusal::Unavailable`] is told to wait, in
/// seconds: the time a failed key fetch waits before the next
/// ([`jwks::MIN_REFRESH`]).
const UNAVAILABLE_RETRY_SECS: u64 = jwks::MIN_REFRESH.as_secs();

/// Why a request was refused before reaching its surface.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token at all: the challenge carries no error code (RFC 6750 §3.1).
    NoToken,
    /// A token was sent and is not good.
    Invalid(String),
    /// The client has failed too often lately; nothing was checked.
    TooMany(std::time::Duration),
    /// The token cannot be checked now (the issuer's keys were never
    /// fetched, the kv store of personal tokens is down): 503, and no
    /// failure counted, since the token may well be good.
    Unavailable(String),
}

impl ResourceServer {
    /// `tls`: the roots the issuer's HTTPS is verified against (the system
    /// roots plus `[http] extra_ca`, as for upstreams).
    pub fn new(
        config: &OAuthConfig,
        door: Arc<Door>,
        tls: rustls::ClientConfig,
        tokens: Tokens,
    ) -> Arc<ResourceServer> {
        Arc::new(ResourceServer {
            jwks: jwks::Jwks::new(&config.issuer, config.jwks_uri.as_deref(), tls),
            metadata_url: metadata::url(&config.resource),
            config: config.clone(),
            door,
            tokens,
        })
    }

    /// A resource server like this one (issuer, keys, failure counts) for
    /// another resource of this server (a toolset's `resource`): it takes
    /// only tokens minted for that resource.
    pub fn for_resource(&self, resource: &str) -> Arc<ResourceServer> {
        let config = OAuthConfig {
            resource: resource.to_string(),
            audience: None,
            ..self.config.clone()
        };
        Arc::new(ResourceServer {
            jwks: self.jwks.clone(),
            metadata_url: metadata::url(resource),
            config,
            door: self.door.clone(),
            tokens: self.tokens.clone(),
        })
    }

    /// Whether the REST surface is protected too.
    pub fn protects_rest(&self) -> bool {
        self.config.rest == RestAccess::Protected
    }

    /// The principal a request's bearer token proves. A client over its
    /// `auth_failures` allowance is refused unchecked; a bad token counts
    /// against it (no token at all does not: that is not a guess).
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
    ) -> Result<Principal, Refusal> {
        let failures = self.door.failures();
        failures.admit(client).map_err(Refusal::TooMany)?;
        let outcome = self.verify(headers).await;
        if let Err(Refusal::Invalid(_)) = &outcome {
            failures.failed(client);
        }
        outcome
    }

    async fn verify(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let token = bearer(headers)?;
        if Tokens::is_personal(token) {
            return self.tokens.principal(token).await.map_err(|e| match e {
                TokenRefusal::Invalid => {
                    Refusal::Invalid("the personal token is unknown, revoked or expired".into())
                }
                TokenRefusal::Unavailable(e) => {
                    tracing::warn!(target: "hangar::oauth", "personal tokens: {e}");
                    Refusal::Unavailable("personal tokens cannot be checked now".into())
                }
            });
        }
        let (alg, kid) = token::key_hint(token).map_err(|e| Refusal::Invalid(e.0))?;
        let keys = self.jwks.keys_for(kid.as_deref()).await.map_err(|e| {
            tracing::warn!(target: "hangar::oauth", "no signing keys: {e}");
            Refusal::Unavailable("the issuer's signing keys are unavailable".into())
        })?;
        if keys.is_empty() {
            return Err(Refusal::Invalid(
                "no signing key of the issuer matches the token".into(),
            ));
        }
        let mut principal =
            token::verify(token, alg, &keys, &self.config).map_err(|e| Refusal::Invalid(e.0))?;
        principal.access_token = Some(AccessToken::new(token));
        Ok(principal)
    }

    /// The 401 answer to `refusal`.
    fn challenge(&self, refusal: &Refusal) -> Response {
        let mut params = Vec::new();
        let body = match refusal {
            Refusal::TooMany(wait) => {
                let e = self.door.failures().refusal(*wait);
                let secs = e.retry_after.unwrap_or_default().as_secs().max(1);
                let mut response = (
                    StatusCode::TOO_MANY_REQUESTS,
                    Json(json!({ "error": "too_many_requests", "error_description": e.message })),
                )
                    .into_response();
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from(secs));
                return response;
            }
            Refusal::Unavailable(why) => {
                let mut response = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(json!({ "error": "temporarily_unavailable", "error_description": why })),
                )
                    .into_response();
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from(UNAVAILABLE_RETRY_SECS));
                return response;
            }
            Refusal::NoToken => {
                json!({ "error": "unauthorized", "error_description": "a bearer token is required" })
            }
            Refusal::Invalid(why) => {
                params.push("error=\"invalid_token\"".to_string());
                params.push(format!("error_description=\"{}\"", quoted(why)));
                json!({ "error": "invalid_token", "error_description": why })
            }
        };
        params.push(format!("resource_metadata=\"{}\"", self.metadata_url));
        if !self.config.scopes_supported.is_empty() {
            params.push(format!(
                "scope=\"{}\"",
                self.config.scopes_supported.join(" ")
            ));
        }
        let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", params.join(", "))) {
            response.headers_mut().insert(WWW_AUTHENTICATE, v);
        }
        response
    }

    /// Adds `resource_metadata` to a surface's `insufficient_scope` challenge.
    fn complete_scope_challenge(&self, response: &mut Response) {
        if response.status() != StatusCode::FORBIDDEN {
            return;
        }
        let Some(challenge) = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.contains("insufficient_scope") && !v.contains("resource_metadata"))
        else {
            return;
        };
        let full = format!("{challenge}, resource_metadata=\"{}\"", self.metadata_url);
        if let Ok(v) = HeaderValue::from_str(&full) {
            response.headers_mut().insert(WWW_AUTHENTICATE, v);
        }
    }
}

/// The `WWW-Authenticate` value a surface sends with 403 when a tool needs
/// scopes the caller's token lacks (SEP-835 step-up: `scope` lists what the
/// call needs). `required` is space-separated.
pub fn insufficient_scope(required: &str) -> HeaderValue {
    let value = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", error_description=\"the token lacks a scope this tool needs\"",
        quoted(required)
    );
    HeaderValue::from_str(&value)
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer error=\"insufficient_scope\""))
}

/// The bearer token of a request: exactly one `Authorization: Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Result<&str, Refusal> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(Refusal::NoToken);
    };
    if values.next().is_some() {
        return Err(Refusal::Invalid(
            "more than one Authorization header".into(),
        ));
    }
    let value = value
        .to_str()
        .map_err(|_| Refusal::Invalid("malformed token".into()))?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        // Another scheme carries no bearer token.
        return Err(Refusal::NoToken);
    }
    let token = token.trim();
    if token.is_empty() || token.contains(' ') {
        return Err(Refusal::Invalid("malformed token".into()));
    }
    Ok(token)
}

/// A value safe inside a quoted-string.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .collect()
}

/// The paths [`routes`] serves `rs`'s document on.
pub fn paths(rs: &ResourceServer) -> Vec<String> {
    metadata::paths(&rs.config.resource)
}

/// The metadata routes. No token is needed to read them, and any origin may:
/// the document is public, and browser-based clients fetch it cross-origin
/// (with an `MCP-Protocol-Version` header, hence the preflight answer).
pub fn routes(rs: &Arc<ResourceServer>) -> Router {
    let doc = Arc::new(metadata::document(&rs.config));
    let mut router = Router::new();
    for path in metadata::paths(&rs.config.resource) {
        let doc = doc.clone();
        let serve = move || async move { cors(Json((*doc).clone()).into_response()) };
        let preflight = || async { cors(StatusCode::NO_CONTENT.into_response()) };
        router = router.route(&path, get(serve).options(preflight));
    }
    router
}

/// The metadata route of a resource server made [`ResourceServer::for_resource`]:
/// only its own path (RFC 9728 §3.1, e.g.
/// `/.well-known/oauth-protected-resource/mcp/NAME`). A path in `taken`
/// (served already for another resource) is not served twice: the toolset
/// is logged and gets none.
pub fn own_routes(rs: &Arc<ResourceServer>, taken: &mut HashSet<String>) -> Router {
    let doc = Arc::new(metadata::document(&rs.config));
    let path = format!(
        "{}{}",
        metadata::WELL_KNOWN,
        metadata::resource_path(&rs.config.resource)
    );
    if !taken.insert(path.clone()) {
        tracing::warn!(target: "hangar::oauth", resource = %rs.config.resource, "{path} already serves another resource's metadata; this resource gets none");
        return Router::new();
    }
    let serve = move || async move { cors(Json((*doc).clone()).into_response()) };
    let preflight = || async { cors(StatusCode::NO_CONTENT.into_response()) };
    Router::new().route(&path, get(serve).options(preflight))
}

fn cors(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("GET, OPTIONS"),
    );
    h.insert(
        "access-control-allow-headers",
        HeaderValue::from_static("*"),
    );
    response
}

/// `router` behind the bearer-token check.
pub fn protect(router: Router, rs: &Arc<ResourceServer>) -> Router {
    router.layer(middleware::from_fn_with_state(rs.clone(), require_token))
}

async fn require_token(
    State(rs): State<Arc<ResourceServer>>,
    mut req: Request,
    next: Next,
) -> Response {
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    match rs.authenticate(req.headers(), client).await {
        Ok(principal) => {
            req.headers_mut().remove(AUTHORIZATION);
            req.extensions_mut().insert(principal);
            let mut response = next.run(req).await;
            rs.complete_scope_challenge(&mut response);
            response
        }
        Err(refusal) => {
            if let Refusal::Invalid(why) = &refusal {
                tracing::info!(target: "hangar::oauth", path = %req.uri().path(), reason = %why, "token refused");
            }
            let mut response = rs.challenge(&refusal);
            // The body stays unread: the connection cannot carry another request.
            if !http_body::Body::is_end_stream(req.body()) {
                response
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn bearer_tokens_are_found_or_refused() {
        assert_eq!(bearer(&headers(&["Bearer abc"])), Ok("abc"));
        assert_eq!(bearer(&headers(&["bearer abc"])), Ok("abc"));
        assert_eq!(bearer(&headers(&[])), Err(Refusal::NoToken));
        assert_eq!(
            bearer(&headers(&["Basic dXNlcjpwdw=="])),
            Err(Refusal::NoToken)
        );
        assert!(matches!(
            bearer(&headers(&["Bearer "])),
            Err(Refusal::Invalid(_))
        ));
        assert!(matches!(
            bearer(&headers(&["Bearer a", "Bearer b"])),
            Err(Refusal::Invalid(_))
        ));
    }

    #[test]
    fn challenges_are_quoted_safely() {
        assert_eq!(quoted("a \"b\" \\c\n"), "a 'b' 'c");
        let v = insufficient_scope("tools:admin");
        assert!(v.to_str().unwrap().contains("scope=\"tools:admin\""));
    }
}

//! Personal tokens at the door (`hangar_core::accounts::Tokens`).
//!
//! - [`accept`]: a surface no OAuth door guards takes a personal token
//!   (`Authorization: Bearer hgr_…`) and serves its principal, as the OAuth
//!   door serves an access token's; a request without one passes unchanged
//!   (an `[auth]` check may read its own `Authorization` header). Behind
//!   `[oauth]` the resource server takes personal tokens itself.
//! - [`in_path`]: `/mcp/t/TOKEN`, for clients that can only be given a URL:
//!   the token moves into the `Authorization` header and out of the path
//!   before anything logs or reads it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{AUTHORIZATION, CONNECTION, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use serde_json::json;

use crate::pipeline::Door;
use hangar_core::accounts::{TokenRefusal, Tokens};
use hangar_core::call::Principal;

/// What [`accept`] needs: the tokens, and the door whose `auth_failures`
/// allowance a refused token counts against.
#[derive(Clone)]
pub struct PersonalDoor {
    pub tokens: Tokens,
    pub door: Arc<Door>,
}

/// The route prefix of the path form: `/mcp/t/TOKEN`.
pub const PATH_PREFIX: &str = "/mcp/t/";
/// What the path form's token is replaced with in the request's URI.
const REDACTED: &str = "/mcp/t/…";

/// `router` taking personal tokens (see the module doc).
pub fn accept(router: Router, st: &Arc<PersonalDoor>) -> Router {
    router.layer(middleware::from_fn_with_state(st.clone(), personal))
}

/// `router` (the MCP routes at `/mcp/t/{token}`, behind their door) with
/// the path's token moved into the `Authorization` header.
pub fn in_path(router: Router) -> Router {
    router.layer(middleware::from_fn(token_from_path))
}

/// Why a personal token did not prove its caller.
pub enum Unproved {
    /// The client is over its `auth_failures` allowance: not checked.
    Throttled(std::time::Duration),
    /// Unknown, revoked or expired.
    Invalid,
    /// The store did not answer.
    Unavailable,
}

impl PersonalDoor {
    /// The principal of the personal token `headers` carry (`None`: they
    /// carry none). A client over its `auth_failures` allowance is refused
    /// unchecked; a bad token counts against it when `counted`.
    pub async fn prove(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        counted: bool,
    ) -> Option<Result<Principal, Unproved>> {
        let token = personal_bearer(headers)?;
        let failures = self.door.failures();
        if let Err(wait) = failures.admit(client) {
            return Some(Err(Unproved::Throttled(wait)));
        }
        Some(match self.tokens.principal(token).await {
            Ok(principal) => Ok(principal),
            Err(TokenRefusal::Invalid) => {
                if counted {
                    failures.failed(client);
                }
                Err(Unproved::Invalid)
            }
            Err(TokenRefusal::Unavailable(e)) => {
                tracing::warn!(target: "hangar::tokens", "personal tokens: {e}");
                Err(Unproved::Unavailable)
            }
        })
    }
}

/// The personal token (`Authorization: Bearer hgr_…`) of a request, if any.
fn personal_bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && Tokens::is_personal(token)).then_some(token)
}

async fn personal(State(st): State<Arc<PersonalDoor>>, mut req: Request, next: Next) -> Response {
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let refusal = match st.prove(req.headers(), client, true).await {
        None => return next.run(req).await,
        Some(Ok(principal)) => {
            req.headers_mut().remove(AUTHORIZATION);
            req.extensions_mut().insert(principal);
            return next.run(req).await;
        }
        Some(Err(refusal)) => refusal,
    };
    let (status, description) = match refusal {
        Unproved::Throttled(wait) => {
            let e = st.door.failures().refusal(wait);
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                Json(json!({ "error": "too_many_requests", "error_description": e.message })),
            )
                .into_response();
            let secs = e.retry_after.unwrap_or_default().as_secs().max(1);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
            return response;
        }
        Unproved::Invalid => (
            StatusCode::UNAUTHORIZED,
            "the personal token is unknown, revoked or expired",
        ),
        Unproved::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "personal tokens cannot be checked now",
        ),
    };
    tracing::info!(target: "hangar::tokens", path = %req.uri().path(), reason = %description, "token refused");
    let mut response = (
        status,
        Json(json!({ "error": "invalid_token", "error_description": description })),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer error=\"invalid_token\""),
        );
    }
    if !http_body::Body::is_end_stream(req.body()) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Moves `/mcp/t/TOKEN`'s token into `Authorization` (replacing any there)
/// and redacts it from the URI, so no later layer logs or reads it.
async fn token_from_path(mut req: Request, next: Next) -> Response {
    let token = (req.uri().path().strip_prefix(PATH_PREFIX))
        .unwrap_or_default()
        .to_string();
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"));
    let redacted = match req.uri().query() {
        Some(q) => format!("{REDACTED}?{q}"),
        None => REDACTED.to_string(),
    };
    if let Ok(uri) = redacted.parse::<Uri>() {
        *req.uri_mut() = uri;
    }
    match bearer {
        Ok(value) if !token.is_empty() && !token.contains('/') => {
            req.headers_mut().insert(AUTHORIZATION, value);
            next.run(req).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "error": "invalid_token", "error_description": "malformed token" })),
        )
            .into_response(),
    }
}

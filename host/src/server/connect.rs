//! `/connect`: where a user connects their own accounts at per-user
//! providers (`hangar_core::accounts`).
//!
//! - `GET /connect` — the caller's providers, and whether each is connected;
//! - `GET /connect/NAME` — starts connecting: to the provider's consent page
//!   (`oauth2-user`) or a page asking for the key (`user-key`);
//! - `GET /connect/NAME/callback` — the provider sends the browser back here;
//! - `POST /connect/NAME` — the key, from that page (or as JSON with the
//!   caller's credentials);
//! - `DELETE /connect/NAME` — disconnects;
//! - `POST /connect/NAME/link` — a connect URL with a ticket, for a page
//!   holding the caller's credentials to open in a tab that does not.
//!
//! The caller is proved by a bearer token (`[oauth]`), the server-wide
//! `[auth]` check, or — for a browser that holds neither — the single-use
//! ticket of a connect URL Hangar handed out. These routes stand outside
//! the OAuth door (the provider's redirect carries no bearer token) and
//! prove the caller themselves.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::tokens::{PersonalDoor, Unproved};
use crate::oauth::ResourceServer;
use crate::pipeline::Live;
use hangar_core::accounts::{Accounts, ConnectError, Next};
use hangar_core::call::{Principal, RequestInfo, Surface};

/// The cookie that binds a flow to the browser that started it.
const COOKIE_NAME: &str = "hangar_connect";
/// The largest body `POST /connect/NAME` reads (a key and a state).
const MAX_BODY: usize = 16 << 10;
/// The pages' policy: no script at all, forms only to this server.
const PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

pub struct ConnectState {
    pub accounts: Arc<Accounts>,
    pub pipeline: Live,
    pub oauth: Option<Arc<ResourceServer>>,
    /// Personal tokens (`hgr_…`), which prove a caller here too.
    pub personal: Arc<PersonalDoor>,
    /// `Secure` cookies, when the public URL is HTTPS.
    pub secure: bool,
}

pub fn router(state: Arc<ConnectState>) -> Router {
    Router::new()
        .route("/connect", get(list))
        .route(
            "/connect/{name}",
            get(start).post(submit).delete(disconnect),
        )
        .route("/connect/{name}/callback", get(callback))
        .route("/connect/{name}/link", axum::routing::post(link))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// How a refused check counts against the client's `auth_failures`.
#[derive(Clone, Copy, PartialEq)]
enum Check {
    /// The credentials are all the request has: a refusal counts.
    Counted,
    /// A ticket, or a flow's `state` and cookie, already say who: the check
    /// only looks for a contradiction, and a browser that sends no
    /// credentials is not guessing any.
    Uncounted,
}

/// Who the request's credentials prove: a bearer token under `[oauth]`, a
/// personal token, else the server-wide `[auth]` check. `None`: nobody (or
/// a client over its `auth_failures` allowance, unchecked).
async fn caller(
    st: &ConnectState,
    headers: &HeaderMap,
    client: SocketAddr,
    check: Check,
) -> Option<Principal> {
    proved(st, headers, client, check).await.ok()
}

/// [`caller`], or why nobody: no credentials (or refused ones), a personal
/// token that is no good, a client over its allowance.
async fn proved(
    st: &ConnectState,
    headers: &HeaderMap,
    client: SocketAddr,
    check: Check,
) -> Result<Principal, ConnectError> {
    (st.personal.door.failures())
        .admit(Some(client.ip()))
        .map_err(ConnectError::Throttled)?;
    match st
        .personal
        .prove(headers, Some(client.ip()), check == Check::Counted)
        .await
    {
        Some(Ok(p)) => return Ok(p),
        Some(Err(Unproved::Throttled(wait))) => return Err(ConnectError::Throttled(wait)),
        Some(Err(Unproved::Invalid)) => return Err(ConnectError::InvalidToken),
        Some(Err(Unproved::Unavailable)) => {
            return Err(ConnectError::Unavailable(
                "personal tokens cannot be checked now".into(),
            ));
        }
        None => {}
    }
    if let Some(rs) = &st.oauth
        && headers.contains_key(axum::http::header::AUTHORIZATION)
        && let Ok(p) = rs.authenticate(headers, Some(client.ip())).await
    {
        return Ok(p);
    }
    let request = RequestInfo::new(Surface::Rest, "GET", "/connect", headers, Some(client));
    (st.pipeline.current())
        .request_principal(request, check == Check::Counted)
        .await
        .ok_or_else(unproved)
}

fn refusal(e: &ConnectError) -> StatusCode {
    match e {
        ConnectError::NotFound(_) => StatusCode::NOT_FOUND,
        ConnectError::Unauthorized(_) | ConnectError::InvalidToken => StatusCode::UNAUTHORIZED,
        ConnectError::Throttled(_) => StatusCode::TOO_MANY_REQUESTS,
        ConnectError::Refused(_) => StatusCode::BAD_REQUEST,
        ConnectError::Provider(_) => StatusCode::BAD_GATEWAY,
        ConnectError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

fn json_error(e: &ConnectError) -> Response {
    let mut response = match e {
        ConnectError::InvalidToken => (
            refusal(e),
            Json(json!({ "error": "invalid_token", "error_description": e.to_string() })),
        )
            .into_response(),
        _ => (refusal(e), Json(json!({ "error": e.to_string() }))).into_response(),
    };
    challenge(e, &mut response);
    response
}

/// The headers a refusal carries: the bearer challenge of a bad personal
/// token, when to retry a throttled client.
fn challenge(e: &ConnectError, response: &mut Response) {
    let headers = response.headers_mut();
    match e {
        ConnectError::InvalidToken => {
            headers.insert(
                axum::http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
        }
        ConnectError::Throttled(wait) => {
            headers.insert(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from(wait.as_secs().max(1)),
            );
        }
        _ => {}
    }
}

fn unproved() -> ConnectError {
    ConnectError::Unauthorized(
        "connecting an account needs an authenticated caller (its credentials, or the ticket of a connect link)"
            .into(),
    )
}

/// `GET /connect`.
async fn list(
    State(st): State<Arc<ConnectState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let p = match proved(&st, &headers, client, Check::Counted).await {
        Ok(p) => p,
        Err(e) => return json_error(&e),
    };
    match st.accounts.list(&p.subject).await {
        Ok(providers) => Json(json!({ "providers": providers })).into_response(),
        Err(e) => json_error(&e),
    }
}

/// `POST /connect/NAME/link`: `{"url"}`, a connect URL with a ticket for
/// the caller its credentials prove (what the explorer opens in a new tab).
async fn link(
    State(st): State<Arc<ConnectState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let p = match proved(&st, &headers, client, Check::Counted).await {
        Ok(p) => p,
        Err(e) => return json_error(&e),
    };
    match st.accounts.link(&name, &p.subject).await {
        Ok(url) => Json(json!({ "url": url })).into_response(),
        Err(e) => json_error(&e),
    }
}

#[derive(Deserialize)]
struct StartQuery {
    ticket: Option<String>,
}

/// `GET /connect/NAME`: for the caller its credentials prove, or the one
/// its ticket names.
async fn start(
    State(st): State<Arc<ConnectState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    Query(query): Query<StartQuery>,
    headers: HeaderMap,
) -> Response {
    if !st.accounts.has(&name) {
        return page(
            &refusal(&ConnectError::NotFound(name.clone())),
            "Not found",
            &format!("There is no provider \u{201c}{name}\u{201d} to connect."),
        );
    }
    let subject = match &query.ticket {
        Some(ticket) => match st.accounts.redeem(&name, ticket).await {
            // A link opened with another user's credentials connects nobody.
            Ok(subject) => match caller(&st, &headers, client, Check::Uncounted).await {
                Some(p) if p.subject != subject => Err(ConnectError::Refused(
                    "this connect link was made for another user".into(),
                )),
                _ => Ok(subject),
            },
            Err(e) => Err(e),
        },
        None => (proved(&st, &headers, client, Check::Counted).await).map(|p| p.subject),
    };
    let started = match subject {
        Ok(subject) => (st.accounts.start(&name, &subject).await).map(|s| (s, subject)),
        Err(e) => Err(e),
    };
    let (started, subject) = match started {
        Ok(s) => s,
        Err(e) => return page(&refusal(&e), "Cannot connect", &e.to_string()),
    };
    let cookie = cookie_header(&name, &started.cookie, st.secure);
    let by_ticket = query.ticket.is_some();
    let mut response = match started.next {
        // A connect link may have been sent by someone else: the page names
        // the user the account will serve before the provider is reached.
        Next::Redirect(url) if by_ticket => consent_page(&name, &url, &subject),
        Next::Redirect(url) => {
            let mut r = StatusCode::FOUND.into_response();
            if let Ok(v) = HeaderValue::from_str(&url) {
                r.headers_mut().insert(LOCATION, v);
            }
            r
        }
        Next::KeyForm { state } => key_form(&name, &state, &subject),
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, v);
    }
    response
}

#[derive(Deserialize)]
struct CallbackQuery {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
}

/// `GET /connect/NAME/callback`: the provider's answer, in the browser that
/// started the flow.
async fn callback(
    State(st): State<Arc<ConnectState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    Query(query): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(state) = query.state.as_deref().filter(|s| !s.is_empty()) else {
        let e = ConnectError::Refused("the provider's answer has no state: start again".into());
        return page(&refusal(&e), "Cannot connect", &e.to_string());
    };
    let code = match (&query.code, &query.error) {
        (Some(code), None) => Ok(code.as_str()),
        (_, Some(error)) => Err(short(error)),
        (None, None) => Err("no code"),
    };
    let who = proved_subject(&st, &headers, client).await;
    let cookie = read_cookie(&headers);
    match (st.accounts)
        .callback(&name, state, code, cookie.as_deref(), who.as_deref())
        .await
    {
        Ok(account) => {
            let whose = account.map(|a| format!(" as {a}")).unwrap_or_default();
            page(
                &StatusCode::OK,
                "Connected",
                &format!(
                    "Connected {name}{whose}. You can close this page and go back to your client."
                ),
            )
        }
        Err(e) => page(&refusal(&e), "Cannot connect", &e.to_string()),
    }
}

/// The subject a request's credentials prove, if it carries any: a
/// callback or form that does must come from the flow's own principal.
async fn proved_subject(
    st: &ConnectState,
    headers: &HeaderMap,
    client: SocketAddr,
) -> Option<String> {
    (caller(st, headers, client, Check::Uncounted).await).map(|p| p.subject)
}

#[derive(Deserialize)]
struct KeyForm {
    state: Option<String>,
    key: String,
}

/// `POST /connect/NAME`: the key, from the form (`state` and the browser's
/// cookie) or as JSON with the caller's credentials.
async fn submit(
    State(st): State<Arc<ConnectState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json = super::body::is_type(&headers, "application/json");
    let form: Result<KeyForm, String> = if json {
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    } else {
        let mut pairs = form_urlencoded::parse(&body);
        let mut state = None;
        let mut key = None;
        for (k, v) in pairs.by_ref() {
            match &*k {
                "state" => state = Some(v.into_owned()),
                "key" => key = Some(v.into_owned()),
                _ => {}
            }
        }
        key.map(|key| KeyForm { state, key })
            .ok_or_else(|| "missing field `key`".to_string())
    };
    let form = match form {
        Ok(f) => f,
        Err(e) => {
            let e = ConnectError::Refused(format!(
                "the body must hold `key` (and, from the form, `state`): {e}"
            ));
            return if json {
                json_error(&e)
            } else {
                page(&refusal(&e), "Cannot connect", &e.to_string())
            };
        }
    };
    let outcome = match &form.state {
        Some(state) => {
            let who = proved_subject(&st, &headers, client).await;
            let cookie = read_cookie(&headers);
            (st.accounts)
                .submit_key(&name, state, cookie.as_deref(), who.as_deref(), &form.key)
                .await
        }
        None => match proved(&st, &headers, client, Check::Counted).await {
            Ok(p) => st.accounts.store_key(&name, &p.subject, &form.key).await,
            Err(e) => Err(e),
        },
    };
    match (outcome, json) {
        (Ok(()), true) => Json(json!({ "connected": true })).into_response(),
        (Ok(()), false) => page(
            &StatusCode::OK,
            "Connected",
            &format!("Connected {name}. You can close this page and go back to your client."),
        ),
        (Err(e), true) => json_error(&e),
        (Err(e), false) => page(&refusal(&e), "Cannot connect", &e.to_string()),
    }
}

/// `DELETE /connect/NAME`.
async fn disconnect(
    State(st): State<Arc<ConnectState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let p = match proved(&st, &headers, client, Check::Counted).await {
        Ok(p) => p,
        Err(e) => return json_error(&e),
    };
    match st.accounts.disconnect(&name, &p.subject).await {
        Ok(()) => Json(json!({ "connected": false })).into_response(),
        Err(e) => json_error(&e),
    }
}

/// A provider's `error` value, as far as it is shown back.
fn short(text: &str) -> &str {
    let end = text.char_indices().nth(64).map_or(text.len(), |(i, _)| i);
    &text[..end]
}

fn cookie_header(name: &str, value: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{COOKIE_NAME}={value}; Path=/connect/{name}; Max-Age=600; HttpOnly; SameSite=Lax{secure}"
    )
}

/// The flow cookie the browser sent, if any.
fn read_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE_NAME)
        .map(|(_, v)| v.to_string())
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A page for the user's browser, under a policy that runs no script.
fn page(status: &StatusCode, title: &str, message: &str) -> Response {
    html(
        *status,
        &format!("<h1>{}</h1>\n<p>{}</p>", escape(title), escape(message)),
        title,
    )
}

/// The page before the provider's, for a browser that came with a
/// connect link: it names the user the account will serve, so someone sent
/// another's link sees it is not theirs.
fn consent_page(name: &str, url: &str, subject: &str) -> Response {
    let name = escape(name);
    html(
        StatusCode::OK,
        &format!(
            "<h1>Connect {name}</h1>\n<p>Your {name} account will serve the user <b>{}</b>. \
             If that is not you, close this page.</p>\n\
             <p><a id=\"continue\" href=\"{}\">Continue to {name}</a></p>",
            escape(subject),
            escape(url)
        ),
        &format!("Connect {name}"),
    )
}

/// The page asking for the key; it names the user the key will serve, so
/// someone sent another's connect link sees it is not theirs.
fn key_form(name: &str, state: &str, subject: &str) -> Response {
    let name = escape(name);
    let subject = escape(subject);
    html(
        StatusCode::OK,
        &format!(
            "<h1>Connect {name}</h1>\n<p>For the user <b>{subject}</b>.</p>\n<form method=\"post\" action=\"/connect/{name}\">\n\
             <input type=\"hidden\" name=\"state\" value=\"{}\">\n\
             <label>Your key for {name}<br><input type=\"password\" name=\"key\" autocomplete=\"off\" required size=\"48\"></label>\n\
             <p><button type=\"submit\">Connect</button></p>\n</form>",
            escape(state)
        ),
        &format!("Connect {name}"),
    )
}

fn html(status: StatusCode, body: &str, title: &str) -> Response {
    let text = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} · Hangar</title>\n\
         <style>body{{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}}</style></head>\n\
         <body>\n{body}\n</body></html>\n",
        escape(title)
    );
    let mut r = (status, text).into_response();
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_CSP));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_cookie_is_read_among_others_and_pages_escape() {
        let mut h = HeaderMap::new();
        h.append(
            COOKIE,
            HeaderValue::from_static("a=1; hangar_connect=xyz; b=2"),
        );
        assert_eq!(read_cookie(&h).as_deref(), Some("xyz"));
        assert_eq!(read_cookie(&HeaderMap::new()), None);
        assert_eq!(
            escape("<b a=\"x\">&'"),
            "&lt;b a=&quot;x&quot;&gt;&amp;&#39;"
        );
        let c = cookie_header("notes", "v", true);
        assert!(
            c.contains("Path=/connect/notes") && c.contains("HttpOnly") && c.ends_with("Secure")
        );
    }
}

//! `POST /uploads` and `GET /uploads` (a session's or principal's uploads),
//! and `GET /artifacts/<area>/<id>/<name>?expires=…&sig=…` (a signed
//! download).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Query, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::body;
use crate::mcp::McpState;
use crate::pipeline::Live;
use hangar_core::call::{Principal, RequestInfo, Surface};
use hangar_core::files::{Area, DownloadRefusal, Entry, Files, StoreError, attachment};

/// What the upload handlers share.
pub struct FilesState {
    pub files: Arc<Files>,
    /// To check that a named session exists and is the caller's.
    pub mcp: Arc<McpState>,
    /// Its server-wide auth check says who a caller without a session is.
    pub pipeline: Live,
    /// How long an upload's body may take to arrive (`body_timeout`).
    pub body_timeout: Option<std::time::Duration>,
}

/// `/uploads` (put behind the OAuth check when `[oauth]` is set).
pub fn uploads_router(state: Arc<FilesState>) -> Router {
    let limit = state.files.max_upload_request();
    Router::new()
        .route("/uploads", get(list).post(upload))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// `/artifacts/...`: the signature is the credential.
pub fn artifacts_router(files: Arc<Files>) -> Router {
    Router::new()
        .route("/artifacts/{area}/{id}/{name}", get(download))
        .with_state(files)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// The area of the caller: the MCP session it names (which must exist and
/// be its own), or else the principal its bearer token or the server-wide
/// auth check proves.
async fn caller_area(
    st: &FilesState,
    headers: &HeaderMap,
    client: SocketAddr,
    token: Option<Principal>,
) -> Result<Area, Response> {
    let subject = token.as_ref().map(|p| p.subject.as_str());
    if let Some(sid) = headers.get("mcp-session-id") {
        let sid = sid.to_str().unwrap_or_default();
        if !st.mcp.session_exists(sid, subject).await {
            return Err(error(StatusCode::NOT_FOUND, "Session not found"));
        }
        return Area::of(Some(sid), None)
            .ok_or_else(|| error(StatusCode::BAD_REQUEST, "malformed Mcp-Session-Id"));
    }
    let principal = match token {
        Some(p) => Some(p),
        None => {
            let request =
                RequestInfo::new(Surface::Rest, "POST", "/uploads", headers, Some(client));
            st.pipeline.current().request_principal(request, true).await
        }
    };
    principal
        .and_then(|p| Area::of(None, Some(&p.subject)))
        .ok_or_else(|| {
            error(
                StatusCode::UNAUTHORIZED,
                "uploads need an MCP session (the Mcp-Session-Id header of an initialized session) or an authenticated caller",
            )
        })
}

fn described(files: &[Arc<Entry>]) -> Value {
    let items: Vec<Value> = files
        .iter()
        .map(|e| {
            json!({
                "handle": e.upload_handle(),
                "name": e.name,
                "size": e.size,
                "mimeType": e.mime_type,
                "expiresIn": e.expires_in(),
            })
        })
        .collect();
    json!({ "uploads": items })
}

/// `POST /uploads`: every file part of a `multipart/form-data` body is
/// stored, or none is. Each part needs a filename; other fields are refused.
///
/// Nothing of the body is read until the head has said it is multipart and
/// no larger than the limit, the caller is known, and some tool takes
/// uploads; every refusal before that closes the connection unread.
async fn upload(
    State(st): State<Arc<FilesState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<Principal>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    if !body::is_type(&headers, "multipart/form-data") {
        return body::unsupported("/uploads", "multipart/form-data");
    }
    let limit = st.files.max_upload_request();
    if body::declared_length(&headers).is_some_and(|n| n > limit as u64) {
        return body::too_large(limit);
    }
    let area = match caller_area(&st, &headers, client, token.map(|t| t.0)).await {
        Ok(area) => area,
        Err(response) => return unread(response),
    };
    let pipeline = st.pipeline.current();
    if !pipeline
        .catalog()
        .tools()
        .iter()
        .any(|t| !t.stages.consumes_uploads.is_empty())
    {
        return body::closing(
            StatusCode::FORBIDDEN,
            "no tool on this server takes uploads (consumes_uploads), so none are accepted".into(),
        );
    }
    let read = read_parts(multipart);
    let parts = match st.body_timeout {
        None => read.await,
        Some(timeout) => match tokio::time::timeout(timeout, read).await {
            Ok(parts) => parts,
            Err(_) => return body::timed_out(timeout),
        },
    };
    let parts = match parts {
        Ok(parts) => parts,
        Err(response) => return unread(response),
    };
    match st.files.store_uploads(&area, parts).await {
        Ok(stored) => (StatusCode::CREATED, Json(described(&stored))).into_response(),
        Err(StoreError::Invalid(m)) => {
            error(StatusCode::BAD_REQUEST, format!("{m}; nothing was stored"))
        }
        Err(StoreError::Quota(m)) => error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{m}; nothing was stored"),
        ),
        Err(StoreError::Io(m)) => error(StatusCode::INTERNAL_SERVER_ERROR, m),
    }
}

/// A refusal after which the connection closes: the body may be unread.
fn unread(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// Every file part of the body, or the answer that refuses it.
async fn read_parts(
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Vec<(String, bytes::Bytes)>, Response> {
    let mut multipart = match multipart {
        Ok(m) => m,
        Err(e) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("POST /uploads takes multipart/form-data: {e}"),
            ));
        }
    };
    let mut parts = Vec::new();
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => {
                return Err(error(
                    e.status(),
                    format!("cannot read the multipart body ({e}); nothing was stored"),
                ));
            }
        };
        let index = parts.len() + 1;
        let Some(name) = field.file_name().map(str::to_string) else {
            let field_name = field.name().unwrap_or("").to_string();
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!(
                    "part {index} ({field_name:?}) is not a file (it has no filename); nothing was stored"
                ),
            ));
        };
        match field.bytes().await {
            Ok(bytes) => parts.push((name, bytes)),
            Err(e) => {
                return Err(error(
                    e.status(),
                    format!("cannot read part {index} ({name:?}): {e}; nothing was stored"),
                ));
            }
        }
    }
    Ok(parts)
}

/// `GET /uploads`: the caller's live uploads.
async fn list(
    State(st): State<Arc<FilesState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    match caller_area(&st, &headers, client, token.map(|t| t.0)).await {
        Ok(area) => Json(described(&st.files.uploads_of(&area))).into_response(),
        Err(response) => response,
    }
}

/// `GET /artifacts/<area>/<id>/<name>?expires=<unix seconds>&sig=<hex>`.
async fn download(
    State(files): State<Arc<Files>>,
    Path((area, id, name)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let expires = query.get("expires").and_then(|e| e.parse::<u64>().ok());
    let (Some(expires), Some(sig)) = (expires, query.get("sig")) else {
        return error(
            StatusCode::FORBIDDEN,
            "a download URL needs its expires and sig parameters",
        );
    };
    let entry = match files.verify_download(&area, &id, &name, expires, sig) {
        Ok(entry) => entry,
        Err(DownloadRefusal::BadSignature) => {
            return error(
                StatusCode::FORBIDDEN,
                "the download URL's signature is wrong",
            );
        }
        Err(DownloadRefusal::Expired) => {
            return error(
                StatusCode::FORBIDDEN,
                "the download URL has expired; read the artifact again for a new one",
            );
        }
        Err(DownloadRefusal::Gone) => {
            return error(StatusCode::NOT_FOUND, "the artifact has expired or is gone");
        }
    };
    // What a tool wrote is served as a file to save, never as a page of
    // this origin: an attachment, its type taken as given (no sniffing an
    // HTML or script out of it), and sandboxed should anything render it.
    match files.read_entry(&entry).await {
        Ok(bytes) => (
            [
                (CONTENT_TYPE, entry.mime_type.clone()),
                (CONTENT_DISPOSITION, attachment(&entry.name)),
                (X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
                (
                    CONTENT_SECURITY_POLICY,
                    "default-src 'none'; sandbox".to_string(),
                ),
                (CACHE_CONTROL, "private, no-store".to_string()),
            ],
            bytes,
        )
            .into_response(),
        Err(_) => error(StatusCode::NOT_FOUND, "the artifact has expired or is gone"),
    }
}

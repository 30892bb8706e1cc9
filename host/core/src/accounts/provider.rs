//! What Hangar asks a per-user OAuth provider, as its client: the
//! authorization request (PKCE S256 and `state`), the code and refresh
//! grants at its token endpoint (HTTP Basic client authentication, RFC 6749
//! §2.3.1) and, once connected, its userinfo endpoint.
//!
//! The provider is a peer like any other: every answer is read under
//! [`MAX_ANSWER`] bytes and [`EXCHANGE_TIMEOUT`], and only the fields used
//! are taken from it.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::Digest as _;

use crate::outbound::CappedBody;

/// How long one exchange with the provider may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from the provider.
const MAX_ANSWER: usize = 64 << 10;

/// An `oauth2-user` provider's settings, filled in.
#[derive(Debug)]
pub struct OAuthSettings {
    pub authorize_url: url::Url,
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
    pub scopes: Vec<String>,
    pub authorize_params: Vec<(String, String)>,
    pub userinfo_url: Option<String>,
    pub redirect_uri: String,
}

/// What a token endpoint granted.
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: Option<u64>,
}

/// Why a grant failed.
#[derive(Debug)]
pub enum GrantError {
    /// The provider refused it (a 4xx, with its `error` code when it gave
    /// one): the code or refresh token is no good.
    Refused(String),
    /// It could not be asked, or answered nonsense (worth trying later).
    Failed(String),
}

/// The PKCE (RFC 7636) challenge of `verifier`: S256.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// Where to send the user's browser to consent.
pub fn authorize_url(settings: &OAuthSettings, state: &str, verifier: &str) -> String {
    let mut url = settings.authorize_url.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &settings.client_id)
            .append_pair("redirect_uri", &settings.redirect_uri)
            .append_pair("state", state)
            .append_pair("code_challenge", &challenge(verifier))
            .append_pair("code_challenge_method", "S256");
        if !settings.scopes.is_empty() {
            query.append_pair("scope", &settings.scopes.join(" "));
        }
        for (k, v) in &settings.authorize_params {
            query.append_pair(k, v);
        }
    }
    url.into()
}

/// The authorization code grant.
pub async fn redeem_code(
    http: &reqwest::Client,
    settings: &OAuthSettings,
    code: &str,
    verifier: &str,
) -> Result<Tokens, GrantError> {
    grant(
        http,
        settings,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", &settings.redirect_uri),
            ("code_verifier", verifier),
        ],
    )
    .await
}

/// The refresh grant.
pub async fn refresh(
    http: &reqwest::Client,
    settings: &OAuthSettings,
    refresh_token: &str,
) -> Result<Tokens, GrantError> {
    grant(
        http,
        settings,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ],
    )
    .await
}

async fn grant(
    http: &reqwest::Client,
    settings: &OAuthSettings,
    form: &[(&str, &str)],
) -> Result<Tokens, GrantError> {
    let client = (settings.client_id.as_str(), settings.client_secret.as_str());
    grant_at(http, &settings.token_url, client, form).await
}

/// A grant at `token_url` as `client` (id and secret, sent with HTTP Basic).
pub async fn grant_at(
    http: &reqwest::Client,
    token_url: &str,
    (client_id, client_secret): (&str, &str),
    form: &[(&str, &str)],
) -> Result<Tokens, GrantError> {
    let basic = STANDARD.encode(format!(
        "{}:{}",
        form_urlencoded::byte_serialize(client_id.as_bytes()).collect::<String>(),
        form_urlencoded::byte_serialize(client_secret.as_bytes()).collect::<String>()
    ));
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let asked = http
        .post(token_url)
        .header(reqwest::header::AUTHORIZATION, format!("Basic {basic}"))
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body)
        .send();
    let (status, answer) = tokio::time::timeout(EXCHANGE_TIMEOUT, async {
        let response = asked
            .await
            .map_err(|e| format!("token endpoint: {}", without_url(&e)))?;
        let status = response.status();
        let bytes = CappedBody::new(response, MAX_ANSWER)
            .map_err(|_| "token endpoint: answer too large".to_string())?
            .bytes()
            .await
            .map_err(|_| "token endpoint: answer too large or cut".to_string())?;
        Ok::<_, String>((status, bytes))
    })
    .await
    .map_err(|_| GrantError::Failed("token endpoint did not answer in time".into()))?
    .map_err(GrantError::Failed)?;
    let json: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
    if status.is_client_error() {
        let code = json
            .get("error")
            .and_then(|e| e.as_str())
            .filter(|e| e.len() <= 64 && e.bytes().all(|c| c.is_ascii_graphic()))
            .unwrap_or("refused");
        return Err(GrantError::Refused(format!("{code}, {status}")));
    }
    if !status.is_success() {
        return Err(GrantError::Failed(format!(
            "token endpoint answered {status}"
        )));
    }
    let text = |k: &str| {
        json.get(k)
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    Ok(Tokens {
        access_token: text("access_token")
            .ok_or_else(|| GrantError::Failed("token endpoint answered no access_token".into()))?,
        refresh_token: text("refresh_token"),
        expires_in: json.get("expires_in").and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        }),
    })
}

/// The account the token belongs to, as the userinfo endpoint names it
/// (`email`, else `preferred_username`, else `sub`); `None` when it does not
/// answer well. Only for showing the user which account is connected.
pub async fn account(http: &reqwest::Client, url: &str, token: &str) -> Option<String> {
    let asked = http.get(url).bearer_auth(token).send();
    let answer = tokio::time::timeout(EXCHANGE_TIMEOUT, async {
        let response = asked.await.ok()?.error_for_status().ok()?;
        CappedBody::new(response, MAX_ANSWER)
            .ok()?
            .bytes()
            .await
            .ok()
    })
    .await
    .ok()??;
    let json: serde_json::Value = serde_json::from_slice(&answer).ok()?;
    ["email", "preferred_username", "sub"]
        .iter()
        .find_map(|k| json.get(k).and_then(|v| v.as_str()))
        .filter(|v| v.len() <= 256)
        .map(str::to_owned)
}

/// A request error without its URL (which may carry a query the operator
/// set) for messages callers see.
fn without_url(e: &reqwest::Error) -> String {
    let mut e = e.to_string();
    if let Some(i) = e.find(" for url (") {
        e.truncate(i);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn the_authorization_request_carries_pkce_state_scopes_and_extras() {
        let settings = OAuthSettings {
            authorize_url: "https://p.example/auth?tenant=a".parse().unwrap(),
            token_url: String::new(),
            client_id: "c i".into(),
            client_secret: String::new(),
            scopes: vec!["openid".into(), "offline_access".into()],
            authorize_params: vec![("prompt".into(), "consent".into())],
            userinfo_url: None,
            redirect_uri: "https://h.example/connect/n/callback".into(),
        };
        let url: url::Url = authorize_url(&settings, "st", "ver").parse().unwrap();
        let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(q["tenant"], "a");
        assert_eq!(q["client_id"], "c i");
        assert_eq!(q["state"], "st");
        assert_eq!(q["code_challenge"], challenge("ver"));
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["scope"], "openid offline_access");
        assert_eq!(q["prompt"], "consent");
        assert_eq!(q["redirect_uri"], "https://h.example/connect/n/callback");
    }
}

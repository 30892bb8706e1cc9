//! Connecting an account: the single-use tickets handed out in connect
//! URLs, and the flows a browser goes through.
//!
//! A flow is started for a principal (proved by its credentials, or by a
//! ticket) and kept in the kv store under a digest of its random `state`
//! for [`FLOW_TTL`], with the PKCE verifier and a digest of a random cookie
//! set on the browser that started it. Its callback (or key form) must
//! bring back that `state`, in that browser, for that provider, and — when
//! it carries credentials — as that principal; the flow is taken in the same
//! step it is read, so a `state` or a code is used once. A browser holding
//! a stolen callback URL, or an attacker's own code pasted into a victim's
//! browser, gets nothing stored.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::connections::{Accounts, Connection, Kind, Setup, digest};
use super::provider::{self, GrantError};
use super::seal::random_token;

/// The kv namespace of tickets, by digest.
const TICKETS: &str = "accounts/tickets";
/// The kv namespace of flows in progress, by digest of their `state`.
const FLOWS: &str = "accounts/flows";
/// How long a connect URL's ticket may wait to be opened.
const TICKET_TTL: Duration = Duration::from_secs(600);
/// How long a user may take between starting a flow and finishing it.
const FLOW_TTL: Duration = Duration::from_secs(600);
/// Tickets (and, apart, flows) kept at once: a flood of them fails with
/// `quota` instead of filling the store.
const MAX_PENDING: u64 = 10_000;

/// Why connecting failed; each maps to one HTTP status at the surface.
#[derive(Debug)]
pub enum ConnectError {
    /// No such per-user provider (404).
    NotFound(String),
    /// No principal: no credentials, or a ticket not (or no longer) good (401).
    Unauthorized(String),
    /// The request does not complete a flow this browser started (400).
    Refused(String),
    /// The provider could not be asked, or answered nonsense (502).
    Provider(String),
    /// The kv store could not be used (503).
    Unavailable(String),
    /// A personal token that is unknown, revoked or expired (401).
    InvalidToken,
    /// The client failed to authenticate too often lately; retry after
    /// this long (429).
    Throttled(std::time::Duration),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::NotFound(name) => write!(f, "no per-user provider \"{name}\""),
            ConnectError::InvalidToken => {
                f.write_str("the personal token is unknown, revoked or expired")
            }
            ConnectError::Throttled(wait) => write!(
                f,
                "too many failed authentications from this client: retry in {}s",
                wait.as_secs().max(1)
            ),
            ConnectError::Unauthorized(m)
            | ConnectError::Refused(m)
            | ConnectError::Provider(m)
            | ConnectError::Unavailable(m) => f.write_str(m),
        }
    }
}

/// A started flow: the cookie to set on the browser, and what it does next.
pub struct Started {
    pub cookie: String,
    pub next: Next,
}

pub enum Next {
    /// To the provider's consent page.
    Redirect(String),
    /// A page asking for the user's key, posting back this `state`.
    KeyForm { state: String },
}

/// One provider as the caller sees it at `GET /connect`.
#[derive(Serialize)]
pub struct Status {
    pub name: String,
    pub kind: &'static str,
    pub connected: bool,
    pub account: Option<String>,
    pub url: String,
}

#[derive(Serialize, Deserialize)]
struct Ticket {
    provider: String,
    subject: String,
}

#[derive(Serialize, Deserialize)]
struct Flow {
    provider: String,
    subject: String,
    /// The browser's cookie, by digest.
    browser: String,
    #[serde(default)]
    verifier: String,
}

impl Accounts {
    /// Keeps `value` under a digest of the random `secret` for `ttl`, at
    /// most [`MAX_PENDING`] in `ns`.
    async fn put_pending<T: Serialize>(
        &self,
        ns: &str,
        secret: &str,
        value: &T,
        ttl: Duration,
    ) -> Result<(), String> {
        let json = serde_json::to_vec(value).expect("serializes");
        (self.kv()?)
            .host_set_capped(
                ns,
                &digest(secret),
                json,
                Some(ttl.as_millis() as u64),
                MAX_PENDING,
            )
            .await
            .map_err(|e| e.to_string())
    }

    /// What `secret` was kept for, taken (used once); `None` when unknown,
    /// expired or already taken.
    async fn take_pending<T: serde::de::DeserializeOwned>(
        &self,
        ns: &str,
        secret: &str,
    ) -> Result<Option<T>, ConnectError> {
        let taken = (self.kv().map_err(ConnectError::Unavailable)?)
            .host_take(ns, &digest(secret))
            .await
            .map_err(|e| ConnectError::Unavailable(e.to_string()))?;
        Ok(taken.and_then(|t| serde_json::from_slice(&t).ok()))
    }

    /// A URL that connects `name` for `subject` from any browser: with a
    /// single-use ticket when the subject is known (and the store takes it).
    pub(super) async fn connect_url(
        &self,
        setup: &Setup,
        name: &str,
        subject: Option<&str>,
    ) -> String {
        let url = format!("{}/connect/{name}", setup.public_url);
        let Some(subject) = subject else {
            return url;
        };
        let ticket = random_token(32);
        let row = Ticket {
            provider: name.to_string(),
            subject: subject.to_string(),
        };
        match self.put_pending(TICKETS, &ticket, &row, TICKET_TTL).await {
            Ok(()) => format!("{url}?ticket={ticket}"),
            Err(e) => {
                tracing::warn!(provider = %name, "credentials: no ticket for a connect URL: {e}");
                url
            }
        }
    }

    /// A connect URL of provider `name` for `subject`, with its ticket (for
    /// a page that has the caller's credentials but cannot hand them to
    /// the browser tab it opens: the explorer).
    pub async fn link(&self, name: &str, subject: &str) -> Result<String, ConnectError> {
        if !self.has(name) {
            return Err(ConnectError::NotFound(name.to_string()));
        }
        let setup = self.setup.load_full();
        Ok(self.connect_url(&setup, name, Some(subject)).await)
    }

    /// The subject a connect URL's ticket was made for; the ticket is used up.
    pub async fn redeem(&self, name: &str, ticket: &str) -> Result<String, ConnectError> {
        let taken: Option<Ticket> = self.take_pending(TICKETS, ticket).await?;
        let expired = || {
            ConnectError::Unauthorized(
                "this connect link is not valid (it was used, or it expired): ask for a new one"
                    .into(),
            )
        };
        let ticket = taken.ok_or_else(expired)?;
        if ticket.provider != name {
            return Err(expired());
        }
        Ok(ticket.subject)
    }

    /// Starts connecting `name` for `subject` in the browser that asked.
    pub async fn start(&self, name: &str, subject: &str) -> Result<Started, ConnectError> {
        let setup = self.setup.load_full();
        let provider =
            (setup.providers.get(name)).ok_or_else(|| ConnectError::NotFound(name.into()))?;
        let (state, cookie) = (random_token(32), random_token(32));
        let verifier = match provider.kind {
            Kind::OAuth(_) => random_token(48),
            Kind::Key => String::new(),
        };
        let flow = Flow {
            provider: name.to_string(),
            subject: subject.to_string(),
            browser: digest(&cookie),
            verifier,
        };
        (self.put_pending(FLOWS, &state, &flow, FLOW_TTL).await)
            .map_err(ConnectError::Unavailable)?;
        let next = match &provider.kind {
            Kind::OAuth(settings) => {
                Next::Redirect(provider::authorize_url(settings, &state, &flow.verifier))
            }
            Kind::Key => Next::KeyForm { state },
        };
        Ok(Started { cookie, next })
    }

    /// The flow `state` names, taken: it must be for `name`, started in the
    /// browser holding `cookie` and, when the request proves a principal,
    /// by that principal.
    async fn take_flow(
        &self,
        name: &str,
        state: &str,
        cookie: Option<&str>,
        caller: Option<&str>,
    ) -> Result<Flow, ConnectError> {
        let taken: Option<Flow> = self.take_pending(FLOWS, state).await?;
        let flow = taken.ok_or_else(|| {
            ConnectError::Refused(
                "this connection is unknown, finished or expired: start again".into(),
            )
        })?;
        if flow.provider != name {
            return Err(ConnectError::Refused(
                "this connection was started for another provider: start again".into(),
            ));
        }
        if cookie.map(digest).as_deref() != Some(flow.browser.as_str()) {
            return Err(ConnectError::Refused(
                "this connection was started in another browser: start again in this one".into(),
            ));
        }
        if caller.is_some_and(|c| c != flow.subject) {
            return Err(ConnectError::Refused(
                "this connection was started by another user".into(),
            ));
        }
        Ok(flow)
    }

    /// The provider's redirect back: the code is redeemed (with the flow's
    /// PKCE verifier) and the tokens stored for the flow's principal.
    /// `error` is the provider's own refusal, when it sent one.
    pub async fn callback(
        &self,
        name: &str,
        state: &str,
        code: Result<&str, &str>,
        cookie: Option<&str>,
        caller: Option<&str>,
    ) -> Result<Option<String>, ConnectError> {
        let setup = self.setup.load_full();
        let provider =
            (setup.providers.get(name)).ok_or_else(|| ConnectError::NotFound(name.into()))?;
        let Kind::OAuth(settings) = &provider.kind else {
            return Err(ConnectError::Refused(format!(
                "\"{name}\" takes a key, not a callback"
            )));
        };
        let flow = self.take_flow(name, state, cookie, caller).await?;
        let code = code.map_err(|error| {
            ConnectError::Refused(format!(
                "the provider did not connect the account ({error})"
            ))
        })?;
        let tokens = provider::redeem_code(&self.http, settings, code, &flow.verifier)
            .await
            .map_err(|e| match e {
                GrantError::Refused(why) => ConnectError::Refused(format!(
                    "the provider refused the code ({why}): start again"
                )),
                GrantError::Failed(why) => ConnectError::Provider(why),
            })?;
        let account = match &settings.userinfo_url {
            Some(url) => provider::account(&self.http, url, &tokens.access_token).await,
            None => None,
        };
        let connection = Connection::new(tokens, account.clone());
        self.store(&setup, name, &flow.subject, &connection)
            .await
            .map_err(ConnectError::Unavailable)?;
        tracing::info!(provider = %name, "credentials: an account was connected");
        Ok(account)
    }

    /// A key pasted in the form of a flow this browser started.
    pub async fn submit_key(
        &self,
        name: &str,
        state: &str,
        cookie: Option<&str>,
        caller: Option<&str>,
        key: &str,
    ) -> Result<(), ConnectError> {
        self.check_key_provider(name)?;
        let flow = self.take_flow(name, state, cookie, caller).await?;
        self.store_key(name, &flow.subject, key).await
    }

    /// Stores `key` as `subject`'s own value of the `user-key` provider `name`.
    pub async fn store_key(
        &self,
        name: &str,
        subject: &str,
        key: &str,
    ) -> Result<(), ConnectError> {
        self.check_key_provider(name)?;
        let key = key.trim();
        if key.is_empty() || key.len() > 8192 || key.chars().any(char::is_control) {
            return Err(ConnectError::Refused(
                "the key must be 1 to 8192 printable characters".into(),
            ));
        }
        let connection = Connection {
            token: key.to_string(),
            refresh: None,
            expires_at: None,
            at: super::connections::now(),
            account: None,
        };
        let setup = self.setup.load_full();
        self.store(&setup, name, subject, &connection)
            .await
            .map_err(ConnectError::Unavailable)?;
        tracing::info!(provider = %name, "credentials: a key was connected");
        Ok(())
    }

    fn check_key_provider(&self, name: &str) -> Result<(), ConnectError> {
        match self.setup.load().providers.get(name).map(|p| &p.kind) {
            None => Err(ConnectError::NotFound(name.into())),
            Some(Kind::Key) => Ok(()),
            Some(Kind::OAuth(_)) => Err(ConnectError::Refused(format!(
                "\"{name}\" connects through its provider's consent page, not with a key"
            ))),
        }
    }

    /// The caller's providers and whether each is connected.
    pub async fn list(&self, subject: &str) -> Result<Vec<Status>, ConnectError> {
        let setup = self.setup.load_full();
        let mut out = Vec::new();
        for (name, p) in &setup.providers {
            let found = self
                .load(&setup, name, subject)
                .await
                .map_err(ConnectError::Unavailable)?;
            out.push(Status {
                name: name.clone(),
                kind: p.kind(),
                connected: found
                    .as_ref()
                    .is_some_and(|c| c.refresh.is_some() || !c.expired()),
                account: found.and_then(|c| c.account),
                url: format!("{}/connect/{name}", setup.public_url),
            });
        }
        Ok(out)
    }

    /// Forgets the caller's connection to `name`.
    pub async fn disconnect(&self, name: &str, subject: &str) -> Result<(), ConnectError> {
        if !self.has(name) {
            return Err(ConnectError::NotFound(name.to_string()));
        }
        self.remove(name, subject)
            .await
            .map_err(ConnectError::Unavailable)?;
        tracing::info!(provider = %name, "credentials: a connection was removed by its user");
        Ok(())
    }
}

//! `UpstreamAuth`: the bearer token an upstream call carries for its caller
//! (`[upstreams.NAME] auth`).
//!
//! - none: the configured `headers` alone, Hangar's own credentials;
//! - `{ kind = "token-exchange", … }`: the caller's OAuth access token
//!   exchanged (RFC 8693, `hangar_core::accounts::Exchanger`) for one scoped to
//!   the upstream;
//! - `{ credential = "X" }`: the caller's value of the per-user provider X,
//!   resolved by its sources as a guest's `credentials.get("X")` is.
//!
//! With either of the last two, the upstream's sessions are per principal
//! (a session opened with one caller's token never serves another), and the
//! catalog's own listings keep using `headers` alone.

use std::sync::Arc;

use hangar_core::accounts::{Accounts, Exchanger};
use hangar_core::call::CallContext;

pub(super) enum UpstreamAuth {
    Own,
    Exchange(Box<Exchanger>),
    Credential {
        provider: String,
        accounts: Arc<Accounts>,
    },
}

impl UpstreamAuth {
    /// Whether calls carry a token of their caller's.
    pub(super) fn per_principal(&self) -> bool {
        !matches!(self, UpstreamAuth::Own)
    }

    /// The bearer for `cx`'s caller (`None`: the configured headers alone).
    /// The error is what the caller is told.
    pub(super) async fn bearer(&self, cx: &CallContext) -> Result<Option<Arc<str>>, String> {
        match self {
            UpstreamAuth::Own => Ok(None),
            UpstreamAuth::Exchange(exchanger) => {
                let subject = (cx.principal.as_ref())
                    .and_then(|p| p.access_token.as_ref())
                    .ok_or(
                        "token exchange needs the caller's OAuth access token (this call came without one)",
                    )?;
                exchanger.token(subject.secret()).await.map(Some)
            }
            UpstreamAuth::Credential { provider, accounts } => accounts
                .resolve(provider, cx.principal.as_ref())
                .await
                .map(|value| Some(Arc::from(value)))
                .map_err(|e| e.message()),
        }
    }
}

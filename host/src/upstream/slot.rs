//! What names an upstream session: the keys (client session, principal,
//! the catalog's own), the slot a session lives in, and the capabilities
//! it declares. Apart from `sessions` (which opens and closes them) so the
//! upstream's own struct can hold slots without naming that code.

use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Value, json};

use super::client::Handshake;
use hangar_core::call::{Askable, CallContext};

/// The session key of the catalog's own listings.
pub(super) const CATALOG_KEY: &str = "hangar:catalog";

/// One upstream session, opened on first use; the lock makes concurrent
/// first calls share one `initialize`.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) handshake: tokio::sync::Mutex<Option<Handshake>>,
    pub(super) used: Mutex<Option<Instant>>,
}

pub(super) fn client_session_key(session_id: &str) -> String {
    format!("session:{session_id}")
}

/// Whose upstream session a call uses: its client session's, else its
/// principal's, else the anonymous one.
pub(super) fn session_key(cx: &CallContext) -> String {
    match (&cx.session_id, &cx.principal) {
        (Some(id), _) => client_session_key(id),
        (None, Some(p)) => format!("principal:{}", p.subject),
        (None, None) => "anonymous".to_string(),
    }
}

/// The client capabilities an upstream session declares: the questions the
/// call that opens it can put to its own client (relayed, see `relay`).
pub(super) fn capabilities(cx: &CallContext) -> Value {
    match cx.events.askable() {
        Askable::Yes {
            elicitation,
            sampling,
            roots,
            ..
        } => {
            let mut caps = json!({});
            if elicitation {
                caps["elicitation"] = json!({});
            }
            if sampling {
                caps["sampling"] = json!({});
            }
            if roots {
                caps["roots"] = json!({});
            }
            caps
        }
        Askable::No(_) => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_per_client_session_then_principal() {
        let mut cx = CallContext::new(None);
        assert_eq!(session_key(&cx), "anonymous");
        cx.principal = Some(hangar_core::call::Principal::new("ana", json!({})));
        assert_eq!(session_key(&cx), "principal:ana");
        cx.session_id = Some("s1".into());
        assert_eq!(session_key(&cx), "session:s1");
    }
}

//! `requestState`: what an input-required round leaves with the client so
//! that the retry — on this replica or any other — can go on without server
//! memory. It is sealed with HMAC-SHA256 under `[server] request_state_key`:
//! the client can read nothing it could use and change nothing unseen.
//! It binds the request it belongs to (method, tool, arguments, the
//! credentials sent) and expires.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How long a client has to answer a round.
const LIFETIME: Duration = Duration::from_secs(600);

/// The key states are sealed with. One per deployment: replicas behind one
/// balancer must share it (`[server] request_state_key`), or a retry that
/// lands elsewhere is refused.
pub struct StateKey(Vec<u8>);

impl StateKey {
    /// The configured key, or a random one for this process.
    pub fn new(configured: Option<&str>) -> StateKey {
        match configured {
            Some(k) => StateKey(k.as_bytes().to_vec()),
            None => {
                let mut key = uuid::Uuid::new_v4().as_bytes().to_vec();
                key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                StateKey(key)
            }
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length")
    }
}

/// An answer the client gave, with the question it answered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Answered {
    /// Digest of the question (method and params).
    pub q: String,
    pub a: Value,
}

/// The contents of a `requestState`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundState {
    /// Unix seconds after which the state is refused.
    exp: u64,
    /// Digest of the request this state belongs to.
    bind: String,
    /// The questions of the round that produced it, by key: their digests.
    pub asked: BTreeMap<String, String>,
    /// Answers from earlier rounds, by key.
    pub known: BTreeMap<String, Answered>,
}

/// Why a `requestState` was refused.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    Malformed,
    Tampered,
    Expired,
    OtherRequest,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Malformed => "requestState is not a state this server issued",
            Refusal::Tampered => "requestState failed its integrity check",
            Refusal::Expired => "requestState has expired; call again without it",
            Refusal::OtherRequest => {
                "requestState belongs to another request (tool, arguments or credentials differ)"
            }
        })
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Who sends a request, as digests bind it: its `authorization` and
/// `x-api-key` headers and its bearer token's subject.
pub(super) fn caller(req: &crate::mcp::request::Request<'_>) -> [Value; 3] {
    let header = |h: &str| {
        req.headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map_or(Value::Null, |v| json!(v))
    };
    let subject = req.token.as_ref().map_or(Value::Null, |t| json!(t.subject));
    [header("authorization"), header("x-api-key"), subject]
}

/// A stable digest of some JSON (hex SHA-256 of its text).
pub fn digest(parts: &[&Value]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.to_string().as_bytes());
        h.update([0]);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl RoundState {
    pub fn new(
        bind: String,
        asked: BTreeMap<String, String>,
        known: BTreeMap<String, Answered>,
    ) -> RoundState {
        RoundState {
            exp: now() + LIFETIME.as_secs(),
            bind,
            asked,
            known,
        }
    }

    /// `payload.mac`, both base64url.
    pub fn seal(&self, key: &StateKey) -> String {
        let payload = serde_json::to_vec(self).expect("states serialize");
        let mut mac = key.mac();
        mac.update(&payload);
        let tag = mac.finalize().into_bytes();
        format!("{}.{}", B64.encode(&payload), B64.encode(tag))
    }

    /// Checks the seal, the expiry and that the state belongs to `bind`.
    pub fn open(sealed: &str, key: &StateKey, bind: &str) -> Result<RoundState, Refusal> {
        let (payload, tag) = sealed.split_once('.').ok_or(Refusal::Malformed)?;
        let payload = B64.decode(payload).map_err(|_| Refusal::Malformed)?;
        let tag = B64.decode(tag).map_err(|_| Refusal::Malformed)?;
        let mut mac = key.mac();
        mac.update(&payload);
        mac.verify_slice(&tag).map_err(|_| Refusal::Tampered)?;
        let state: RoundState = serde_json::from_slice(&payload).map_err(|_| Refusal::Malformed)?;
        if state.exp < now() {
            return Err(Refusal::Expired);
        }
        if state.bind != bind {
            return Err(Refusal::OtherRequest);
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> RoundState {
        let mut asked = BTreeMap::new();
        asked.insert("elicitation-1".to_string(), digest(&[&json!("q")]));
        RoundState::new("bind".into(), asked, BTreeMap::new())
    }

    #[test]
    fn a_sealed_state_opens_for_its_request_only() {
        let key = StateKey::new(Some("k"));
        let sealed = state().seal(&key);
        let opened = RoundState::open(&sealed, &key, "bind").unwrap();
        assert_eq!(opened.asked, state().asked);
        assert_eq!(
            RoundState::open(&sealed, &key, "other"),
            Err(Refusal::OtherRequest)
        );
        assert_eq!(
            RoundState::open(&sealed, &StateKey::new(Some("k2")), "bind"),
            Err(Refusal::Tampered)
        );
        assert_eq!(
            RoundState::open("nonsense", &key, "bind"),
            Err(Refusal::Malformed)
        );
    }

    #[test]
    fn any_changed_byte_is_refused() {
        let key = StateKey::new(None);
        let sealed = state().seal(&key);
        let (payload, tag) = sealed.split_once('.').unwrap();
        let mut bytes = B64.decode(payload).unwrap();
        let i = bytes.iter().position(|b| *b == b'1').unwrap();
        bytes[i] = b'2';
        let forged = format!("{}.{tag}", B64.encode(&bytes));
        assert_eq!(
            RoundState::open(&forged, &key, "bind"),
            Err(Refusal::Tampered)
        );
    }

    #[test]
    fn an_expired_state_is_refused() {
        let key = StateKey::new(Some("k"));
        let mut s = state();
        s.exp = now() - 1;
        assert_eq!(
            RoundState::open(&s.seal(&key), &key, "bind"),
            Err(Refusal::Expired)
        );
    }
}

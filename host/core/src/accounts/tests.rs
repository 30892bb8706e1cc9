//! Accounts over the embedded kv store: resolution by source, tickets and
//! flows used once, and rows that hold no plaintext. (The OAuth flows
//! against a real provider are black-box tests: `tests/test_accounts.py`.)

use std::sync::Arc;

use serde_json::json;

use super::connections::*;
use super::*;
use crate::call::Principal;
use crate::kv::KvStore;
use hangar_config::Config;

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

async fn accounts(providers: &str) -> (Accounts, Arc<KvStore>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("hangar-accounts-{}", uuid::Uuid::new_v4()));
    let (kv, problems) = crate::kv::open(&Default::default(), &dir, None).await;
    assert!(problems.is_empty(), "{problems:?}");
    let kv = kv.unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let accounts = Accounts::new(Some(kv.clone()), tls);
    let config = Config::parse(&format!(
        "[server]\npublic_url = \"https://mcp.example.com/\"\n\
         [credentials]\nencryption_key = \"{KEY}\"\n{providers}"
    ))
    .unwrap();
    let problems = accounts.configure(&config, &|t| Ok(t.to_string()));
    assert!(problems.is_empty(), "{problems:?}");
    (accounts, kv, dir)
}

fn principal(subject: &str, claims: serde_json::Value) -> Principal {
    Principal::new(subject, claims)
}

const PASTE: &str = "[credentials.paste]\nkind = \"user-key\"\nteam_claim = \"org\"\n\
                     teams = { acme = \"acme-key\" }\ndefault = \"server-key\"\n";

#[tokio::test]
async fn the_users_own_key_then_the_team_then_the_default() {
    let (a, _, dir) = accounts(PASTE).await;
    let alice = principal("alice", json!({ "org": "acme" }));
    let bob = principal("bob", json!({}));
    assert_eq!(a.resolve("paste", Some(&alice)).await.unwrap(), "acme-key");
    assert_eq!(a.resolve("paste", Some(&bob)).await.unwrap(), "server-key");
    assert_eq!(a.resolve("paste", None).await.unwrap(), "server-key");
    a.store_key("paste", "alice", "alice-key").await.unwrap();
    assert_eq!(a.resolve("paste", Some(&alice)).await.unwrap(), "alice-key");
    // Bob's answer is not Alice's.
    assert_eq!(a.resolve("paste", Some(&bob)).await.unwrap(), "server-key");
    let listed = a.list("alice").await.unwrap();
    assert!(listed[0].connected && listed[0].url == "https://mcp.example.com/connect/paste");
    a.disconnect("paste", "alice").await.unwrap();
    assert_eq!(a.resolve("paste", Some(&alice)).await.unwrap(), "acme-key");
    assert!(!a.list("alice").await.unwrap()[0].connected);
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn none_resolved_names_a_single_use_connect_url_for_that_user() {
    let (a, _, dir) = accounts("[credentials.paste]\nkind = \"user-key\"\n").await;
    let alice = principal("alice", json!({}));
    let e = a
        .resolve("paste", Some(&alice))
        .await
        .unwrap_err()
        .message();
    let prefix = "credentials: no credentials for \"paste\": connect it at https://mcp.example.com/connect/paste?ticket=";
    assert!(e.starts_with(prefix), "{e}");
    let ticket = &e[prefix.len()..];
    // Another provider's ticket is no good here; this one is, once.
    assert!(matches!(
        a.redeem("other", ticket).await,
        Err(ConnectError::Unauthorized(_))
    ));
    let e = a
        .resolve("paste", Some(&alice))
        .await
        .unwrap_err()
        .message();
    let ticket = &e[prefix.len()..];
    assert_eq!(a.redeem("paste", ticket).await.unwrap(), "alice");
    assert!(matches!(
        a.redeem("paste", ticket).await,
        Err(ConnectError::Unauthorized(_))
    ));
    // An anonymous caller gets the page, without a ticket.
    let e = a.resolve("paste", None).await.unwrap_err().message();
    assert!(
        e.ends_with("connect it at https://mcp.example.com/connect/paste"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_key_flow_completes_once_in_its_browser_for_its_user() {
    let (a, _, dir) = accounts("[credentials.paste]\nkind = \"user-key\"\n").await;
    let start = || async { a.start("paste", "alice").await.unwrap() };
    let state = |s: &Started| match &s.next {
        Next::KeyForm { state } => state.clone(),
        Next::Redirect(_) => panic!("a key provider asks for the key"),
    };
    // Another browser's cookie, or none: refused, and the flow is spent.
    let s = start().await;
    let refused = a
        .submit_key("paste", &state(&s), Some("other"), None, "k")
        .await;
    assert!(
        matches!(refused, Err(ConnectError::Refused(_))),
        "{refused:?}"
    );
    let again = a
        .submit_key("paste", &state(&s), Some(&s.cookie), None, "k")
        .await;
    assert!(matches!(again, Err(ConnectError::Refused(_))), "{again:?}");
    // Credentials of another user: refused.
    let s = start().await;
    let refused = a
        .submit_key("paste", &state(&s), Some(&s.cookie), Some("bob"), "k")
        .await;
    assert!(
        matches!(refused, Err(ConnectError::Refused(_))),
        "{refused:?}"
    );
    // A forged state: refused.
    let forged = a
        .submit_key("paste", "forged", Some(&s.cookie), None, "k")
        .await;
    assert!(
        matches!(forged, Err(ConnectError::Refused(_))),
        "{forged:?}"
    );
    assert!(
        a.resolve("paste", Some(&principal("alice", json!({}))))
            .await
            .is_err()
    );
    // Its own browser: stored for Alice.
    let s = start().await;
    a.submit_key("paste", &state(&s), Some(&s.cookie), None, "alice-key")
        .await
        .unwrap();
    let alice = principal("alice", json!({}));
    assert_eq!(a.resolve("paste", Some(&alice)).await.unwrap(), "alice-key");
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn rows_are_sealed_and_bound_to_their_user() {
    let (a, kv, dir) = accounts("[credentials.paste]\nkind = \"user-key\"\n").await;
    a.store_key("paste", "alice", "alice-secret-key")
        .await
        .unwrap();
    let row = kv
        .host_get(CONNECTIONS, &row_key("paste", "alice"))
        .await
        .unwrap()
        .unwrap();
    assert!(!row.windows(12).any(|w| w == b"alice-secret"));
    // Alice's row copied to Bob's key opens for nobody.
    kv.host_set(CONNECTIONS, &row_key("paste", "bob"), row, None)
        .await
        .unwrap();
    let bob = principal("bob", json!({}));
    assert!(a.resolve("paste", Some(&bob)).await.is_err());
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_connection_is_stale_near_its_expiry() {
    let at = now();
    let c = |lifetime: u64, age: u64| Connection {
        token: String::new(),
        refresh: None,
        expires_at: Some(at - age + lifetime),
        at: at - age,
        account: None,
    };
    // An hour-long token: fresh until its last minute.
    assert!(!c(3600, 0).stale() && !c(3600, 3500).stale() && c(3600, 3550).stale());
    // A 10 s token: stale in its last second.
    assert!(!c(10, 0).stale() && c(10, 9).stale());
    let forever = Connection {
        expires_at: None,
        ..c(1, 0)
    };
    assert!(!forever.stale() && !forever.expired());
}

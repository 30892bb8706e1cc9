//! `Accounts`: the per-user providers one load configured, and users'
//! connections to them, each a sealed row of the kv store keyed by
//! provider and a digest of the subject.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::call::Principal;
use crate::kv::KvStore;
use hangar_config::{CredentialConfig, Source};

use super::locks::KeyedLocks;
use super::provider::{self, OAuthSettings};
use super::seal::Sealer;

/// The kv namespace of users' connections (a host namespace: no plugin
/// reaches it).
pub(super) const CONNECTIONS: &str = "accounts/connections";
/// How long a connection read from the store is used again without asking
/// the store: a guest call that resolves one does not wait for the store
/// each time. What this process writes or removes takes effect at once;
/// a connection another replica made, at once (no connection is not kept);
/// one it removed, within this long.
const KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(5);
/// Connections kept read at most (least used go first).
const KEPT_CAPACITY: usize = 10_000;
/// A token within this long of its expiry is refreshed before it is handed
/// out (or within a tenth of its lifetime, for short-lived ones).
const REFRESH_MARGIN_SECS: u64 = 60;

/// Users' connections, the providers they are made at, and the flows that
/// make them (see the module doc).
pub struct Accounts {
    pub(super) kv: Option<Arc<KvStore>>,
    pub(super) http: reqwest::Client,
    pub(super) setup: ArcSwap<Setup>,
    /// One refresh at a time per connection row: the others wait for it and
    /// read what it stored.
    pub(super) refreshing: KeyedLocks,
    /// Connections read lately, by row, with when they were read (see [`KEPT_FOR`]).
    kept: quick_cache::sync::Cache<String, (std::time::Instant, Option<Connection>)>,
}

/// What one load configured.
#[derive(Default)]
pub(super) struct Setup {
    pub(super) providers: BTreeMap<String, Arc<UserProvider>>,
    pub(super) sealer: Option<Sealer>,
    /// `[server] public_url`, without a trailing `/`.
    pub(super) public_url: String,
}

/// A per-user provider, its values filled in.
pub struct UserProvider {
    pub name: String,
    pub(super) kind: Kind,
    pub(super) sources: Vec<Source>,
    pub(super) team_claim: Option<String>,
    pub(super) teams: BTreeMap<String, String>,
    pub(super) default: Option<String>,
}

pub(super) enum Kind {
    OAuth(Box<OAuthSettings>),
    Key,
}

impl UserProvider {
    /// Its value for the caller's team (`teams[<the team_claim claim>]`).
    pub(super) fn team_value(&self, principal: Option<&Principal>) -> Option<&String> {
        let claim = self.team_claim.as_deref()?;
        let team = principal?.claims.get(claim)?.as_str()?;
        self.teams.get(team)
    }

    /// The config's name of its kind.
    pub fn kind(&self) -> &'static str {
        match self.kind {
            Kind::OAuth(_) => "oauth2-user",
            Kind::Key => "user-key",
        }
    }
}

/// One user's connection, as sealed in its row.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct Connection {
    pub(super) token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) refresh: Option<String>,
    /// Unix seconds; none: it does not expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<u64>,
    /// When it was made or last refreshed (unix seconds).
    pub(super) at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) account: Option<String>,
}

impl Connection {
    pub(super) fn new(tokens: provider::Tokens, account: Option<String>) -> Connection {
        let at = now();
        Connection {
            token: tokens.access_token,
            refresh: tokens.refresh_token,
            expires_at: tokens.expires_in.map(|s| at.saturating_add(s)),
            at,
            account,
        }
    }

    /// Whether it should be refreshed before use.
    pub(super) fn stale(&self) -> bool {
        let Some(expires) = self.expires_at else {
            return false;
        };
        let lifetime = expires.saturating_sub(self.at);
        let margin = REFRESH_MARGIN_SECS.min(lifetime / 10);
        now().saturating_add(margin) >= expires
    }

    pub(super) fn expired(&self) -> bool {
        self.expires_at.is_some_and(|e| now() >= e)
    }
}

impl Accounts {
    pub fn new(kv: Option<Arc<KvStore>>, tls: rustls::ClientConfig) -> Accounts {
        Accounts {
            kv,
            http: crate::outbound::client(tls, std::time::Duration::from_secs(10)),
            setup: ArcSwap::from_pointee(Setup::default()),
            refreshing: KeyedLocks::default(),
            kept: quick_cache::sync::Cache::new(KEPT_CAPACITY),
        }
    }

    /// Takes the per-user providers of `config`; answers the problems met
    /// (by config path). Providers that cannot be built are left out.
    pub fn configure(
        &self,
        config: &hangar_config::Config,
        substitute: &dyn Fn(&str) -> Result<String, String>,
    ) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let credentials = &config.credentials;
        let public_url = config
            .server
            .public_url
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_string();
        let mut providers = BTreeMap::new();
        for (name, cfg) in &credentials.providers {
            if !cfg.is_per_user() {
                continue;
            }
            match build(name, cfg, &public_url, substitute) {
                Ok(p) => {
                    providers.insert(name.clone(), Arc::new(p));
                }
                Err(e) => problems.push((format!("credentials.{name}"), e)),
            }
        }
        let sealer = if providers.is_empty() {
            None
        } else {
            match credentials.encryption_key() {
                Ok(key) => Some(Sealer::new(&key)),
                Err(e) => {
                    problems.push(("credentials.encryption_key".into(), e));
                    None
                }
            }
        };
        if !providers.is_empty() && self.kv.is_none() {
            problems.push((
                "credentials".into(),
                "per-user providers keep connections in the kv store, which did not open".into(),
            ));
        }
        self.setup.store(Arc::new(Setup {
            providers,
            sealer,
            public_url,
        }));
        problems
    }

    /// Whether the current config has any per-user provider.
    pub fn configured(&self) -> bool {
        !self.setup.load().providers.is_empty()
    }

    /// Whether `name` is a per-user provider of the current config.
    pub fn has(&self, name: &str) -> bool {
        self.setup.load().providers.contains_key(name)
    }

    pub(super) fn kv(&self) -> Result<&KvStore, String> {
        self.kv
            .as_deref()
            .ok_or_else(|| "the kv store is unavailable".to_string())
    }

    /// The connection of `subject` to `name`: as read within [`KEPT_FOR`],
    /// else from the store.
    pub(super) async fn load(
        &self,
        setup: &Setup,
        name: &str,
        subject: &str,
    ) -> Result<Option<Connection>, String> {
        if let Some((at, kept)) = self.kept.get(&row_key(name, subject))
            && at.elapsed() < KEPT_FOR
        {
            return Ok(kept);
        }
        self.load_stored(setup, name, subject).await
    }

    /// The connection as the store has it now (another replica may have
    /// refreshed it).
    pub(super) async fn load_stored(
        &self,
        setup: &Setup,
        name: &str,
        subject: &str,
    ) -> Result<Option<Connection>, String> {
        let sealer = setup
            .sealer
            .as_ref()
            .ok_or("credentials: [credentials] encryption_key is not usable")?;
        let sealed = self
            .kv()?
            .host_get(CONNECTIONS, &row_key(name, subject))
            .await
            .map_err(|e| format!("credentials: {name}: {e}"))?;
        // A row that does not open (another key, another row's value) is as
        // good as none: the user connects again.
        let found: Option<Connection> = sealed
            .and_then(|s| sealer.open(&row_binding(name, subject), &s))
            .and_then(|plain| serde_json::from_slice(&plain).ok());
        // Only a connection is kept: a user who has just connected through
        // another replica is not told for 5 s more that they have not.
        match &found {
            Some(c) => (self.kept).insert(
                row_key(name, subject),
                (std::time::Instant::now(), Some(c.clone())),
            ),
            None => {
                self.kept.remove(&row_key(name, subject));
            }
        }
        Ok(found)
    }

    pub(super) async fn store(
        &self,
        setup: &Setup,
        name: &str,
        subject: &str,
        c: &Connection,
    ) -> Result<(), String> {
        let sealer = setup
            .sealer
            .as_ref()
            .ok_or("credentials: [credentials] encryption_key is not usable")?;
        let plain = serde_json::to_vec(c).expect("a connection serializes");
        let sealed = sealer.seal(&row_binding(name, subject), &plain);
        let row = row_key(name, subject);
        (self.kv()?)
            .host_set(CONNECTIONS, &row, sealed, None)
            .await
            .map_err(|e| format!("credentials: {name}: {e}"))?;
        (self.kept).insert(row, (std::time::Instant::now(), Some(c.clone())));
        Ok(())
    }

    pub(super) async fn remove(&self, name: &str, subject: &str) -> Result<(), String> {
        let row = row_key(name, subject);
        self.kept.remove(&row);
        (self.kv()?)
            .host_delete(CONNECTIONS, &row)
            .await
            .map_err(|e| format!("credentials: {name}: {e}"))
    }
}

/// The kv key of a connection: the provider and a digest of the subject (a
/// subject may be long, or hold anything).
pub(super) fn row_key(name: &str, subject: &str) -> String {
    format!("{name}/{}", digest(subject))
}

/// What a sealed row is bound to: provider and subject, unambiguously.
fn row_binding(name: &str, subject: &str) -> String {
    format!("{name}\0{subject}")
}

pub(super) fn digest(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A provider of the config, its values filled in.
fn build(
    name: &str,
    cfg: &CredentialConfig,
    public_url: &str,
    substitute: &dyn Fn(&str) -> Result<String, String>,
) -> Result<UserProvider, String> {
    let (kind, fallback) = match cfg {
        CredentialConfig::OAuth2User {
            authorize_url,
            token_url,
            client_id,
            client_secret,
            scopes,
            authorize_params,
            userinfo_url,
            redirect_uri,
            fallback,
        } => {
            let absolute = |key: &str, value: &str| -> Result<String, String> {
                let value = substitute(value)?;
                let url = url::Url::parse(&value).map_err(|e| format!("{key}: {e}"))?;
                if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                    return Err(format!("{key}: not an absolute http(s) URL"));
                }
                Ok(value)
            };
            let settings = OAuthSettings {
                authorize_url: absolute("authorize_url", authorize_url)?
                    .parse()
                    .expect("checked"),
                token_url: absolute("token_url", token_url)?,
                client_id: substitute(client_id)?,
                client_secret: substitute(client_secret)?,
                scopes: scopes.clone(),
                authorize_params: authorize_params
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), substitute(v)?)))
                    .collect::<Result<_, String>>()?,
                userinfo_url: userinfo_url
                    .as_deref()
                    .map(|u| absolute("userinfo_url", u))
                    .transpose()?,
                redirect_uri: match redirect_uri {
                    Some(r) => absolute("redirect_uri", r)?,
                    None => format!("{public_url}/connect/{name}/callback"),
                },
            };
            (Kind::OAuth(Box::new(settings)), fallback)
        }
        CredentialConfig::UserKey { fallback } => (Kind::Key, fallback),
        _ => return Err("not a per-user provider".into()),
    };
    if !fallback.teams.is_empty() && fallback.team_claim.is_none() {
        return Err("teams: set team_claim (the claim naming the caller's team) too".into());
    }
    Ok(UserProvider {
        name: name.to_string(),
        kind,
        sources: fallback.sources.clone(),
        team_claim: fallback.team_claim.clone(),
        teams: fallback
            .teams
            .iter()
            .map(|(k, v)| Ok((k.clone(), substitute(v)?)))
            .collect::<Result<_, String>>()?,
        default: fallback.default.as_deref().map(substitute).transpose()?,
    })
}

//! Which value a per-user provider answers for a caller: its `sources` in
//! order — the caller's own connection (refreshed first when about to
//! expire, one refresh at a time), its team's value, the server-wide one —
//! or an error naming a connect URL for that caller.

use super::connections::{Accounts, Connection, Kind, Setup, UserProvider, row_key};

/// The kv namespace of refresh claims (one per connection being refreshed).
const REFRESHING: &str = "accounts/refreshing";
/// How long a refresh claim holds (the grant's own timeout is 10 s): a
/// replica that dies while refreshing blocks the others no longer.
const REFRESH_CLAIM: std::time::Duration = std::time::Duration::from_secs(15);
use super::provider::{self, GrantError};
use crate::call::Principal;
use hangar_config::Source;

/// Why a per-user provider has no value for a caller.
#[derive(Debug)]
pub enum Unresolved {
    /// No source has one: the caller may connect at `url` (its own, with a
    /// ticket, when `for_caller`).
    Connect {
        message: String,
        url: String,
        for_caller: bool,
    },
    /// The store or the provider failed.
    Failed(String),
}

impl Unresolved {
    /// What the guest is told.
    pub fn message(self) -> String {
        match self {
            Unresolved::Connect { message, .. } | Unresolved::Failed(message) => message,
        }
    }
}

impl Accounts {
    /// The value of provider `name` for `principal`, from the first of its
    /// sources that has one; the error says where to connect it.
    pub async fn resolve(
        &self,
        name: &str,
        principal: Option<&Principal>,
    ) -> Result<String, Unresolved> {
        let setup = self.setup.load_full();
        let provider = (setup.providers.get(name)).ok_or_else(|| {
            Unresolved::Failed(format!("credentials: {name}: the provider did not load"))
        })?;
        for source in &provider.sources {
            match source {
                Source::User => {
                    if let Some(p) = principal
                        && let Some(token) = (self.user_token(&setup, provider, &p.subject))
                            .await
                            .map_err(Unresolved::Failed)?
                    {
                        return Ok(token);
                    }
                }
                Source::Team => {
                    if let Some(value) = provider.team_value(principal) {
                        return Ok(value.clone());
                    }
                }
                Source::Default => {
                    if let Some(value) = &provider.default {
                        return Ok(value.clone());
                    }
                }
            }
        }
        let subject = principal.map(|p| p.subject.as_str());
        let url = self.connect_url(&setup, name, subject).await;
        Err(Unresolved::Connect {
            message: format!("credentials: no credentials for \"{name}\": connect it at {url}"),
            url,
            for_caller: subject.is_some() && provider.sources.contains(&Source::User),
        })
    }

    /// Whether provider `name` has a value for `principal` by one of its
    /// sources, asking nobody (an expired token with a refresh token counts:
    /// using it refreshes it). What `[server] hide_unconnected` hides by. A
    /// provider that is not per-user always has one.
    pub async fn usable(&self, name: &str, principal: Option<&Principal>) -> bool {
        let setup = self.setup.load_full();
        let Some(provider) = setup.providers.get(name) else {
            return true;
        };
        for source in &provider.sources {
            let found = match source {
                Source::User => match principal {
                    Some(p) => matches!(
                        self.load(&setup, name, &p.subject).await,
                        Ok(Some(c)) if c.refresh.is_some() || !c.expired()
                    ),
                    None => false,
                },
                Source::Team => provider.team_value(principal).is_some(),
                Source::Default => provider.default.is_some(),
            };
            if found {
                return true;
            }
        }
        false
    }

    /// The caller's own connection to `name`, if it has one now (refreshed
    /// when due) — what a call waiting for the user to connect looks for.
    pub async fn own(&self, name: &str, subject: &str) -> Result<Option<String>, String> {
        let setup = self.setup.load_full();
        match setup.providers.get(name) {
            Some(provider) => self.user_token(&setup, provider, subject).await,
            None => Ok(None),
        }
    }

    /// The caller's own token, refreshed first when it is about to expire.
    async fn user_token(
        &self,
        setup: &Setup,
        provider: &UserProvider,
        subject: &str,
    ) -> Result<Option<String>, String> {
        let name = &provider.name;
        let Some(found) = self.load(setup, name, subject).await? else {
            return Ok(None);
        };
        let (Kind::OAuth(settings), true) = (&provider.kind, found.stale()) else {
            return Ok(Some(found.token));
        };
        if found.refresh.is_none() {
            // Nothing to refresh with: usable until it expires, then gone.
            return Ok((!found.expired()).then_some(found.token));
        }
        let row = row_key(name, subject);
        let lock = self.refreshing.get(&row);
        let outcome = {
            let _one_at_a_time = lock.lock().await;
            self.refresh_held(setup, name, settings, subject, &row)
                .await
        };
        self.refreshing.forget(&row, lock);
        outcome
    }

    /// The refresh of `row`, under its lock: another call may have done it
    /// meanwhile (then its token), else this one does.
    async fn refresh_held(
        &self,
        setup: &Setup,
        name: &str,
        settings: &provider::OAuthSettings,
        subject: &str,
        row: &str,
    ) -> Result<Option<String>, String> {
        let Some(current) = self.load_stored(setup, name, subject).await? else {
            return Ok(None);
        };
        let Some(refresh) = current.refresh.clone().filter(|_| current.stale()) else {
            return Ok(Some(current.token));
        };
        // One refresh at a time across the replicas too: a replica that
        // finds the claim held waits for what the holder stores (a provider
        // that rotates refresh tokens refuses the second use of one, and
        // may revoke the whole grant for it).
        if !self.claim_refresh(row).await {
            return self
                .refreshed_elsewhere(setup, name, subject, current)
                .await;
        }
        let outcome = provider::refresh(&self.http, settings, &refresh).await;
        let handled = self
            .take_refresh(setup, name, subject, current, outcome)
            .await;
        self.release_refresh(row).await;
        handled
    }

    /// Holds the store-wide claim on refreshing `row` (true also when the
    /// store cannot say: then only this process's lock holds).
    async fn claim_refresh(&self, row: &str) -> bool {
        let Ok(kv) = self.kv() else {
            return true;
        };
        kv.host_claim(REFRESHING, row, REFRESH_CLAIM.as_millis() as u64)
            .await
            .unwrap_or(true)
    }

    async fn release_refresh(&self, row: &str) {
        if let Ok(kv) = self.kv() {
            let _ = kv.host_delete(REFRESHING, row).await;
        }
    }

    /// The connection another replica is refreshing, once it has stored it
    /// (or removed it: the provider refused). Waits up to [`REFRESH_CLAIM`],
    /// or until the claim is given up with nothing new stored; then the old
    /// token while it is valid.
    async fn refreshed_elsewhere(
        &self,
        setup: &Setup,
        name: &str,
        subject: &str,
        current: Connection,
    ) -> Result<Option<String>, String> {
        let deadline = tokio::time::Instant::now() + REFRESH_CLAIM;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            match self.load_stored(setup, name, subject).await? {
                Some(c) if !c.stale() => return Ok(Some(c.token)),
                Some(_) => {}
                None => return Ok(None),
            }
            // Released with nothing new stored: that refresh failed.
            let row = row_key(name, subject);
            if matches!(self.kv()?.host_get(REFRESHING, &row).await, Ok(None)) {
                break;
            }
        }
        if current.expired() {
            return Err(format!(
                "credentials: {name}: refreshing the connection is taking too long"
            ));
        }
        Ok(Some(current.token))
    }

    /// What a refresh grant answered: stored (or the connection removed).
    async fn take_refresh(
        &self,
        setup: &Setup,
        name: &str,
        subject: &str,
        current: Connection,
        outcome: Result<provider::Tokens, GrantError>,
    ) -> Result<Option<String>, String> {
        match outcome {
            Ok(tokens) => {
                let mut next = Connection::new(tokens, current.account);
                // A provider that does not rotate keeps the one it had.
                next.refresh = next.refresh.or(current.refresh);
                let token = next.token.clone();
                self.store(setup, name, subject, &next).await?;
                tracing::info!(provider = %name, "credentials: a connection was refreshed");
                Ok(Some(token))
            }
            Err(GrantError::Refused(why)) => {
                self.remove(name, subject).await.ok();
                tracing::warn!(provider = %name, "credentials: the provider refused a refresh ({why}); the connection was removed");
                Err(format!(
                    "credentials: {name}: the provider refused to refresh the connection ({why}); connect it again at {}",
                    self.connect_url(setup, name, Some(subject)).await
                ))
            }
            // Not refreshed now: the token serves while it lasts.
            Err(GrantError::Failed(why)) if !current.expired() => {
                tracing::warn!(provider = %name, "credentials: refreshing a connection failed ({why}); its token is still valid");
                Ok(Some(current.token))
            }
            Err(GrantError::Failed(why)) => Err(format!(
                "credentials: {name}: refreshing the connection failed: {why}"
            )),
        }
    }
}

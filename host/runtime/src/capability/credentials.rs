//! Credentials: `credentials.get(provider)` for tools, from the
//! `[credentials.NAME]` providers a plugin's grants name.
//!
//! Providers are built once at load and shared by every plugin granted
//! them: a `static` one answers its value; an `oauth2-client-credentials`
//! one asks its token endpoint (HTTP Basic client authentication, RFC 6749
//! §4.4) and keeps the token until shortly before it expires, so many calls
//! and instances share one token and the endpoint is asked once per
//! lifetime. A plugin sees only the providers it was granted.
//!
//! As a [`Capability`]: the providers are the load's part, the granted ones
//! the plugin's, and a call's [`CredentialsCall`] serves the import.
//!
//! A per-user provider (`oauth2-user`, `user-key`) is resolved for the
//! call's principal by `hangar_core::accounts`: its own connection, its team's
//! value, the server-wide default — or an error naming where to connect.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::sync::{Mutex, Semaphore};

use wasmtime::component::{HasSelf, Linker};

use super::http::{ByteBudget, HttpClient};
use super::shape::{
    CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems, grant_lines,
};
use crate::bindings::tool::hangar::plugin::credentials as wit;
use hangar_config::{CredentialConfig, CredentialsConfig, PluginConfig};
use hangar_core::accounts::{Accounts, Unresolved};
use hangar_core::call::Principal;
use hangar_core::call::{EventSink, QuestionKind, ask_until};

/// The import tools ask for credentials through.
const CREDENTIALS_IMPORT: &str = "hangar:plugin/credentials";

/// The credentials capability (see the module doc).
pub struct Credentials;

/// One call's credentials: whose, and what it was granted.
pub struct CredentialsCall {
    plugin: Arc<str>,
    granted: Arc<PluginCredentials>,
    principal: Option<Principal>,
    /// Where a URL-mode elicitation goes, and until when it may wait.
    events: EventSink,
    deadline: Instant,
}

impl Capability for Credentials {
    const IMPORTS: &'static [&'static str] = &[CREDENTIALS_IMPORT];
    type Load = Providers;
    type Plugin = Arc<PluginCredentials>;
    type Call = CredentialsCall;

    /// Every `[credentials.NAME]` provider; one that cannot be built is a
    /// problem at its table.
    fn load(setup: &LoadSetup<'_>, problems: &mut Problems) -> Providers {
        let substitute = |text: &str| setup.substitute(text);
        if let Some(accounts) = setup.accounts {
            for (path, error) in accounts.configure(setup.config, &substitute) {
                problems.add(path, error);
            }
        }
        let (providers, broken) = Providers::build(
            &setup.config.credentials,
            setup.client,
            setup.accounts,
            &substitute,
        );
        for (name, error) in broken {
            problems.add(format!("credentials.{name}"), error);
        }
        providers
    }

    fn configure(
        providers: &Providers,
        plugin: &PluginSetup<'_>,
        problems: &mut Problems,
    ) -> Arc<PluginCredentials> {
        let names = plugin.config.map_or(&[][..], |p| &p.grants.credentials[..]);
        Arc::new(providers.granted(names).unwrap_or_else(|error| {
            problems.add(plugin.at("grants"), error);
            PluginCredentials::default()
        }))
    }

    fn per_call(
        granted: &Arc<PluginCredentials>,
        call: &CallSetup<'_>,
    ) -> anyhow::Result<CredentialsCall> {
        let mut state = CredentialsCall {
            plugin: call.plugin.clone(),
            granted: granted.clone(),
            principal: None,
            events: EventSink::default(),
            deadline: call.deadline,
        };
        Self::next_call(&mut state, call);
        Ok(state)
    }

    /// Only a plugin granted a per-user provider keeps the caller (and where
    /// to ask it): every other call copies nothing more than it did.
    fn next_call(state: &mut CredentialsCall, call: &CallSetup<'_>) {
        if state.granted.per_user() {
            state.principal = call.principal.cloned();
            state.events = call.events.clone();
            state.deadline = call.deadline;
        }
    }

    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut CredentialsCall,
    ) -> anyhow::Result<()> {
        wit::add_to_linker::<T, HasSelf<CredentialsCall>>(linker, get)
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    }

    fn check_lines(imports: &[String], plugin: Option<&PluginConfig>) -> Vec<String> {
        grant_lines(
            imports,
            CREDENTIALS_IMPORT,
            "credentials",
            plugin.map(|p| &p.grants.credentials[..]),
        )
    }
}

impl wit::Host for CredentialsCall {
    async fn get(&mut self, provider: String) -> Result<String, String> {
        match self.granted.0.get(&provider).map(|p| p.as_ref()) {
            Some(Provider::User(accounts)) => {
                let accounts = accounts.clone();
                self.user_value(&accounts, &provider).await
            }
            _ => self.granted.get(&self.plugin, &provider).await,
        }
    }
}

/// How often a call waiting for its user to connect looks again.
const CONNECT_POLL: Duration = Duration::from_millis(250);

impl CredentialsCall {
    /// A per-user provider's value for the call's principal. When there is
    /// none and the client declared URL-mode elicitation, the client is
    /// asked to open the connect URL and the call waits (until shortly
    /// before its deadline) for the user to connect.
    async fn user_value(&self, accounts: &Accounts, provider: &str) -> Result<String, String> {
        let unresolved = match accounts.resolve(provider, self.principal.as_ref()).await {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let (
            Unresolved::Connect {
                message,
                url,
                for_caller: true,
            },
            Some(principal),
        ) = (&unresolved, &self.principal)
        else {
            return Err(unresolved.message());
        };
        if self
            .events
            .askable()
            .check(QuestionKind::ElicitUrl)
            .is_err()
        {
            return Err(message.clone());
        }
        let until = ask_until(self.deadline);
        let params = serde_json::json!({
            "mode": "url",
            "message": format!("Connect your {provider} account: the tool you called acts with it."),
            "url": url,
            "elicitationId": uuid::Uuid::new_v4().to_string(),
        });
        let answer = self
            .events
            .ask(QuestionKind::ElicitUrl, None, params, until)
            .await;
        let accepted = answer
            .as_ref()
            .is_ok_and(|a| a.get("action").and_then(|v| v.as_str()) == Some("accept"));
        if !accepted {
            return Err(message.clone());
        }
        // The user opens the URL in a browser; the connection lands in the store.
        while Instant::now() + CONNECT_POLL < until {
            tokio::time::sleep(CONNECT_POLL).await;
            if let Some(token) = accounts.own(provider, &principal.subject).await? {
                return Ok(token);
            }
        }
        Err(message.clone())
    }
}

/// How long a token endpoint may take to answer.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// A token without `expires_in` is kept this long.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// The longest a token is kept, whatever its `expires_in` says: a day. A
/// larger value (even `u64::MAX`, or `1e300`) is taken as this, so a
/// careless or hostile endpoint cannot overflow the clock or pin a token for
/// good.
const MAX_LIFETIME: Duration = Duration::from_secs(86_400);
/// Largest token endpoint answer read.
const MAX_TOKEN_RESPONSE: u64 = 64 << 10;

/// Every provider of the config, by name.
#[derive(Default)]
pub struct Providers(HashMap<String, Arc<Provider>>);

/// The providers one plugin was granted.
#[derive(Default)]
pub struct PluginCredentials(HashMap<String, Arc<Provider>>);

impl std::fmt::Debug for PluginCredentials {
    // Names only: a provider holds secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

pub enum Provider {
    Static(String),
    OAuth(Box<OAuthProvider>),
    /// Per user: resolved by the process's accounts for each caller.
    User(Arc<Accounts>),
}

pub struct OAuthProvider {
    token_url: http::Uri,
    client_id: String,
    client_secret: String,
    scopes: Vec<String>,
    client: Arc<HttpClient>,
    /// The current token and when to stop using it; the lock makes
    /// concurrent callers wait for one fetch instead of each fetching.
    cached: Mutex<Option<(String, Instant)>>,
}

impl Providers {
    /// Builds every provider; `substitute` fills `{{ env.X }}` / `{{ file.X }}`.
    /// A provider that cannot be built is left out and reported by name.
    pub fn build(
        config: &CredentialsConfig,
        client: &Arc<HttpClient>,
        accounts: Option<&Arc<Accounts>>,
        substitute: &dyn Fn(&str) -> Result<String, String>,
    ) -> (Providers, Vec<(String, String)>) {
        let mut providers = HashMap::new();
        let mut problems = Vec::new();
        for (name, cfg) in &config.providers {
            let built = match cfg {
                // Its problems were reported when the accounts took it.
                _ if cfg.is_per_user() => match accounts {
                    Some(a) if a.has(name) => Ok(Provider::User(a.clone())),
                    _ => continue,
                },
                CredentialConfig::Static { value } => substitute(value).map(Provider::Static),
                CredentialConfig::OAuth2ClientCredentials {
                    token_url,
                    client_id,
                    client_secret,
                    scopes,
                } => (|| {
                    let token_url: http::Uri = substitute(token_url)?
                        .parse()
                        .map_err(|e| format!("token_url: {e}"))?;
                    if token_url.host().is_none() {
                        return Err("token_url: not an absolute http(s) URL".to_string());
                    }
                    Ok(Provider::OAuth(Box::new(OAuthProvider {
                        token_url,
                        client_id: substitute(client_id)?,
                        client_secret: substitute(client_secret)?,
                        scopes: scopes.clone(),
                        client: client.clone(),
                        cached: Mutex::new(None),
                    })))
                })(),
                CredentialConfig::OAuth2User { .. } | CredentialConfig::UserKey { .. } => {
                    unreachable!("per-user providers are matched above")
                }
            };
            match built {
                Ok(p) => {
                    providers.insert(name.clone(), Arc::new(p));
                }
                Err(e) => problems.push((name.clone(), e)),
            }
        }
        (Providers(providers), problems)
    }

    /// The providers named in a plugin's grants; an unknown name is an error.
    pub fn granted(&self, names: &[String]) -> Result<PluginCredentials, String> {
        names
            .iter()
            .map(|n| match self.0.get(n) {
                Some(p) => Ok((n.clone(), p.clone())),
                None => Err(format!(
                    "grants.credentials: no provider [credentials.{n}] (or it did not load)"
                )),
            })
            .collect::<Result<_, _>>()
            .map(PluginCredentials)
    }
}

impl PluginCredentials {
    /// Whether any of them is resolved per caller.
    fn per_user(&self) -> bool {
        self.0.values().any(|p| matches!(**p, Provider::User(_)))
    }

    /// The token of `provider`, if the plugin was granted it.
    pub async fn get(&self, plugin: &str, provider: &str) -> Result<String, String> {
        let Some(p) = self.0.get(provider) else {
            tracing::warn!(
                plugin,
                "credentials: {provider} not granted to plugin {plugin}"
            );
            return Err(format!(
                "credentials: {provider} not granted to plugin {plugin}"
            ));
        };
        match p.as_ref() {
            Provider::Static(value) => Ok(value.clone()),
            Provider::OAuth(o) => o.token().await.map_err(|e| {
                tracing::warn!(plugin, "credentials: {provider}: {e}");
                format!("credentials: {provider}: {e}")
            }),
            // Served by `CredentialsCall::user_value`, with the caller.
            Provider::User(_) => Err(format!("credentials: {provider}: a per-user provider")),
        }
    }
}

impl OAuthProvider {
    async fn token(&self) -> Result<String, String> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref()
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let (token, lifetime) = tokio::time::timeout(TOKEN_TIMEOUT, self.fetch())
            .await
            .map_err(|_| "token endpoint did not answer in time".to_string())??;
        // Stop using it a little before it expires, so no call sends a token
        // that expires on the way.
        let margin = (lifetime / 10).min(Duration::from_secs(30));
        *cached = Some((token.clone(), Instant::now() + lifetime - margin));
        Ok(token)
    }

    /// One client-credentials grant: the token and its lifetime.
    async fn fetch(&self) -> Result<(String, Duration), String> {
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if !self.scopes.is_empty() {
                form.append_pair("scope", &self.scopes.join(" "));
            }
            form.finish()
        };
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_urlencoded::byte_serialize(self.client_id.as_bytes()).collect::<String>(),
            form_urlencoded::byte_serialize(self.client_secret.as_bytes()).collect::<String>()
        ));
        let host = self.token_url.host().unwrap_or_default();
        let request = http::Request::post(&self.token_url)
            .header(http::header::HOST, host)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
            .body(
                Full::new(Bytes::from(form))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .map_err(|e| e.to_string())?;
        let tls = self.token_url.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = self
            .token_url
            .port_u16()
            .unwrap_or(if tls { 443 } else { 80 });
        // The token URL is the operator's own setting: not subject to grants.
        let addr = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("token endpoint: {e}"))?
            .next()
            .ok_or("token endpoint: no address")?;
        let name = tls
            .then(|| {
                rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
            })
            .transpose()
            .map_err(|e| format!("token endpoint: {e}"))?;
        let permit = Arc::new(Semaphore::new(1))
            .try_acquire_owned()
            .expect("a fresh semaphore has a permit");
        let timeouts = wasmtime_wasi_http::RequestOptions {
            connect_timeout: Some(TOKEN_TIMEOUT),
            first_byte_timeout: Some(TOKEN_TIMEOUT),
            between_bytes_timeout: Some(TOKEN_TIMEOUT),
        };
        let budget = Arc::new(ByteBudget::new(MAX_TOKEN_RESPONSE));
        let response = self
            .client
            .send(request, addr, name, timeouts, budget, permit)
            .await
            .map_err(|e| format!("token endpoint: {e}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("token endpoint: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("token endpoint answered {status}"));
        }
        let answer: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| "token endpoint answered no JSON")?;
        let token = answer
            .get("access_token")
            .and_then(|t| t.as_str())
            .ok_or("token endpoint answered no access_token")?;
        Ok((token.to_string(), lifetime(answer.get("expires_in"))))
    }
}

/// How long a token is kept, from its `expires_in` (seconds: a number, or a
/// string of one as some endpoints send): within `0..=MAX_LIFETIME`, so a
/// negative or zero value means "fetch again next time"; none, or one that
/// is not a number, [`DEFAULT_LIFETIME`].
fn lifetime(expires_in: Option<&serde_json::Value>) -> Duration {
    let secs = match expires_in {
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match secs.filter(|s| s.is_finite()) {
        None => DEFAULT_LIFETIME,
        Some(s) if s <= 0.0 => Duration::ZERO,
        Some(s) => Duration::from_secs_f64(s.min(MAX_LIFETIME.as_secs_f64())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expires_in_is_clamped_and_never_overflows_the_clock() {
        let of = |v: serde_json::Value| lifetime(Some(&v));
        assert_eq!(of(json!(3600)), Duration::from_secs(3600));
        assert_eq!(of(json!("3600")), Duration::from_secs(3600));
        for huge in [json!(u64::MAX), json!(1e300), json!("1e300"), json!(86_401)] {
            assert_eq!(of(huge), MAX_LIFETIME);
        }
        for spent in [json!(-1), json!(i64::MIN), json!(-1e300), json!(0)] {
            assert_eq!(of(spent), Duration::ZERO);
        }
        assert_eq!(of(json!("soon")), DEFAULT_LIFETIME);
        assert_eq!(of(json!(null)), DEFAULT_LIFETIME);
        assert_eq!(lifetime(None), DEFAULT_LIFETIME);
        // What `token` does with the largest: no panic.
        let until = Instant::now() + of(json!(u64::MAX));
        assert!(until > Instant::now());
    }
}

//! The 2026-07-28 front's side of the shared handlers: [`Modern`], what
//! the front keeps across requests (the key sealing input-required rounds,
//! the tasks), and [`ModernRequest`], one admitted request, which gives the
//! handlers its `Front`: results in the modern shape, an unknown resource
//! as invalid params, the log level from `_meta`, and questions to the
//! client asked in input-required rounds.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::RequestMeta;
use super::result::complete;
use super::rounds::Rounds;
use super::state::{StateKey, caller, digest};
use super::tasks::Tasks;
use crate::mcp::jsonrpc::{self, RpcError};
use crate::mcp::methods::Method;
use crate::mcp::request::{self, Front, Request};
use hangar_core::call::{Askable, LogLevel, Question};
use hangar_core::kv::KvStore;

/// What the 2026-07-28 front keeps across requests.
pub struct Modern {
    /// Seals the `requestState` of input-required rounds.
    pub(super) key: Arc<StateKey>,
    /// Tool calls running as tasks (the tasks extension).
    pub(super) tasks: Arc<Tasks>,
}

impl Modern {
    /// `state_key` seals input-required rounds (random when `None`); tasks
    /// are kept in `store` (the kv store; without one no call becomes a
    /// task), at most `max_tasks` per owner. `shared`: other replicas use
    /// the same store (`[cluster]`).
    pub fn new(
        state_key: Option<&str>,
        store: Option<Arc<KvStore>>,
        shared: bool,
        max_tasks: u64,
    ) -> Modern {
        let mut tasks = Tasks::new(store);
        tasks.keep_per_owner(max_tasks);
        Modern {
            key: Arc::new(StateKey::new(state_key)),
            tasks: Arc::new(if shared {
                tasks.shared_by_replicas()
            } else {
                tasks
            }),
        }
    }
}

/// One admitted modern request: what its `_meta` said, its method, and the
/// front's state.
pub(super) struct ModernRequest<'a> {
    pub(super) meta: RequestMeta,
    pub(super) method: Method,
    /// The catalog answers per caller (see `Catalog::per_caller`).
    pub(super) per_caller: bool,
    pub(super) modern: &'a Modern,
}

impl ModernRequest<'_> {
    /// Whether the answer may depend on who asked, so a shared cache must
    /// not keep it: a principal (bearer token) shaped it, credentials were
    /// sent, or the catalog answers per caller (an auth stage or
    /// `visible_to` anywhere, or a server-wide auth check).
    fn private(&self, req: &Request<'_>) -> bool {
        const CREDENTIALS: [&str; 3] = ["authorization", "x-api-key", "cookie"];
        req.token.is_some()
            || self.per_caller
            || CREDENTIALS.iter().any(|h| req.headers.contains_key(*h))
    }

    /// What a request's `requestState` is bound to: the method, what it
    /// names, its arguments and the credentials sent, so a state cannot be
    /// replayed on another request or by another caller.
    fn binding(&self, req: &Request<'_>, name: &str, args: &Value) -> String {
        let [authorization, api_key, subject] = caller(req);
        digest(&[
            &json!(self.method.name()),
            &json!(name),
            args,
            &authorization,
            &api_key,
            &subject,
        ])
    }
}

impl Front for ModernRequest<'_> {
    fn reshapes(&self) -> bool {
        true
    }

    fn result(&self, req: &Request<'_>, result: Value) -> Value {
        complete(result, self.method, self.private(req))
    }

    /// An unknown resource is invalid params (-32602) here, not -32002.
    fn error_code(&self, code: i64) -> i64 {
        if code == jsonrpc::RESOURCE_NOT_FOUND {
            jsonrpc::INVALID_PARAMS
        } else {
            code
        }
    }

    /// A modern request opts in to logs in its own `_meta`.
    fn log_level(&self, _: &Request<'_>) -> Option<LogLevel> {
        self.meta.log_level
    }

    fn runs_apps(&self, _: &Request<'_>) -> bool {
        hangar_core::call::apps::client_runs_apps(Some(&self.meta.capabilities))
    }

    /// Every question reaches the rounds, which answer or keep it. The
    /// rounds carry form questions; a URL is told in the call's error.
    fn askable(&self, _: &Request<'_>, _sse: bool) -> Askable {
        Askable::Yes {
            elicitation: true,
            elicitation_url: false,
            sampling: true,
            roots: true,
        }
    }

    fn rounds(
        &self,
        req: &Request<'_>,
        name: &str,
        args: &Value,
    ) -> Result<Option<Box<dyn request::Rounds>>, RpcError> {
        let bind = self.binding(req, name, args);
        let rounds = Rounds::begin(&self.modern.key, &self.meta, &req.params, bind)?;
        Ok(Some(Box::new(SealedRounds {
            rounds,
            key: self.modern.key.clone(),
        })))
    }
}

/// One run's rounds, with the key their `requestState` is sealed with.
struct SealedRounds {
    rounds: Rounds,
    key: Arc<StateKey>,
}

impl request::Rounds for SealedRounds {
    fn ask(&mut self, ask: Question) -> bool {
        self.rounds.ask(ask)
    }

    fn input_required(&self) -> Option<Value> {
        self.rounds.input_required(&self.key)
    }

    fn missing_capability(&self) -> Option<RpcError> {
        self.rounds.missing_capability()
    }

    /// A tool call's result: cached by nobody, so not private.
    fn result(&self, result: Value) -> Value {
        complete(result, Method::ToolsCall, false)
    }
}

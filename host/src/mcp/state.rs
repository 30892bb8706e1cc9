//! `McpState`: what the `/mcp` handlers share — the pipeline in service,
//! the sessions, the questions waiting for clients' answers, the limits on
//! what one client holds — and how it is built. What only one revision's
//! front keeps (the 2026-07-28 front's tasks and round key) is its own.

use std::sync::Arc;

use super::guard::OriginPolicy;
use super::limits::ClientLimits;
use super::questions::Questions;
use super::replicas;
use super::session::{self, SessionReport, Sessions};
use crate::pipeline::Live;
use hangar_config::{ErrorStyle, ServerConfig};
use hangar_core::cluster::Cluster;

/// What the `/mcp` handlers share.
pub struct McpState {
    /// The pipeline in service; each request takes its current one once.
    pub pipeline: Live,
    pub policy: OriginPolicy,
    pub page_size: usize,
    pub errors: ErrorStyle,
    pub trace_ids: bool,
    pub(super) sessions: Sessions,
    /// Questions sent to clients, waiting for their answers.
    pub(super) questions: Questions,
    /// Turns true at shutdown: long-lived streams (`subscriptions/listen`)
    /// end gracefully.
    pub(super) closing: tokio::sync::watch::Sender<bool>,
    /// The replicas' shared Redis (`[cluster]`).
    pub(super) cluster: Option<Arc<Cluster>>,
    /// What one client may hold open: streams, sessions, subscriptions.
    pub(super) limits: ClientLimits,
}

impl McpState {
    /// Serves by `[server]`'s keys as they were at start-up: the Host/Origin
    /// policy, `page_size`, `errors`, `trace_ids`, `max_sessions` live at
    /// once (each forgotten after `session_timeout` unused) and what one
    /// client may hold open (`max_*_per_client`). `cluster`: the replicas'
    /// Redis, which sessions and questions are shared through.
    pub fn new(pipeline: Live, server: &ServerConfig, cluster: Option<Arc<Cluster>>) -> McpState {
        let sessions = Sessions::with_on_end(
            server.max_sessions.max(1),
            server.session_timeout,
            session_ended(&pipeline),
        )
        .shared_by(cluster.clone());
        let questions = Questions::default();
        if let Some(cluster) = &cluster {
            let changes = pipeline.current().changes().clone();
            changes.forward_to(replicas::to_other_replicas(cluster));
            cluster.listen(replicas::from_other_replicas(
                sessions.clone(),
                questions.clone(),
                changes,
                cluster.node().to_string(),
            ));
        }
        McpState {
            policy: OriginPolicy::of(server),
            page_size: server.page_size.max(1),
            errors: server.errors,
            trace_ids: server.trace_ids,
            sessions,
            pipeline,
            questions,
            cluster,
            closing: tokio::sync::watch::Sender::new(false),
            limits: ClientLimits::new(
                server.max_streams_per_client,
                server.max_sessions_per_client,
                server.max_subscriptions_per_session,
            ),
        }
    }

    /// Ends the sessions' GET streams (at shutdown).
    pub fn end_streams(&self) {
        self.sessions.end_streams();
        self.closing.send_replace(true);
    }

    /// Whether session `id` is live and belongs to `owner` (the subject of
    /// the request's bearer token, if any).
    pub async fn session_exists(&self, id: &str, owner: Option<&str>) -> bool {
        self.sessions.find(id, owner).await.is_some()
    }

    /// How many sessions are live, and how many were forgotten.
    pub fn session_report(&self) -> SessionReport {
        self.sessions.report()
    }
}

/// What ends with an MCP session: its upstream sessions, in the catalog in
/// service then.
fn session_ended(pipeline: &Live) -> session::OnEnd {
    let pipeline = pipeline.clone();
    Arc::new(move |id: &str| pipeline.current().session_ended(id))
}

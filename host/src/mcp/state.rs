//! `McpState`: what the `/mcp` handlers share — the pipeline in service,
//! the sessions, the questions waiting for clients' answers, the caps on
//! what one client holds — and how it is built. What only one revision's
//! front keeps (the 2026-07-28 front's tasks and round key) is its own.

use std::sync::Arc;
use std::time::Duration;

use super::asks::Asks;
use super::caps::Caps;
use super::guard::OriginPolicy;
use super::replicas;
use super::session::{self, SessionReport, Sessions};
use crate::cluster::Cluster;
use crate::config::ErrorStyle;
use crate::pipeline::Live;

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
    pub(super) asks: Asks,
    /// Turns true at shutdown: long-lived streams (`subscriptions/listen`)
    /// end gracefully.
    pub(super) closing: tokio::sync::watch::Sender<bool>,
    /// The replicas' shared Redis (`[cluster]`).
    pub(super) cluster: Option<Arc<Cluster>>,
    /// What one client may hold open: streams, sessions, subscriptions.
    pub(super) caps: Caps,
}

impl McpState {
    /// `max_sessions` live at once, each forgotten after `session_timeout`
    /// unused.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        pipeline: Live,
        policy: OriginPolicy,
        page_size: usize,
        errors: ErrorStyle,
        trace_ids: bool,
        max_sessions: usize,
        session_timeout: Duration,
        cluster: Option<Arc<Cluster>>,
    ) -> McpState {
        let sessions =
            Sessions::with_on_end(max_sessions, session_timeout, session_ended(&pipeline))
                .shared_by(cluster.clone());
        let asks = Asks::default();
        if let Some(cluster) = &cluster {
            let changes = pipeline.current().changes().clone();
            changes.forward_to(replicas::to_other_replicas(cluster));
            cluster.listen(replicas::from_other_replicas(
                sessions.clone(),
                asks.clone(),
                changes,
                cluster.node().to_string(),
            ));
        }
        McpState {
            policy,
            page_size,
            errors,
            trace_ids,
            sessions,
            pipeline,
            asks,
            cluster,
            closing: tokio::sync::watch::Sender::new(false),
            caps: Caps::default(),
        }
    }

    /// What one client may hold open (`[server] max_*_per_client`).
    pub fn with_caps(mut self, caps: Caps) -> McpState {
        self.caps = caps;
        self
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

//! What replicas of a cluster (`[cluster]`) tell each other over the
//! shared Redis's bus: a cancellation or an answer that landed on a replica
//! which does not run the call, and resource updates guests announce; and
//! what a replica does with what the others published.

use std::sync::Arc;

use serde_json::Value;

use super::questions::Questions;
use super::session::Sessions;
use hangar_core::call::{Forward, ResourceChanges};
use hangar_core::cluster::Cluster;
use hangar_core::cluster::bus::{BusMessage, Handler};

/// Publishes a `notifications/cancelled` for a call of `session` that
/// does not run here.
pub(super) async fn pass_cancel(cluster: &Cluster, session: &str, request: &Value) {
    let message = BusMessage::Cancel {
        session: session.to_string(),
        request: request.clone(),
    };
    if let Err(e) = cluster.publish(&message).await {
        tracing::warn!("a cancellation not passed to the other replicas: {e}");
    }
}

/// Publishes a client's answer to a question no call here asked.
pub(super) async fn pass_answer(
    cluster: &Cluster,
    session: Option<&str>,
    id: Value,
    outcome: Result<Value, Value>,
) {
    let (result, error) = match outcome {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    let message = BusMessage::Answer {
        session: session.map(str::to_string),
        id,
        result,
        error,
    };
    if let Err(e) = cluster.publish(&message).await {
        tracing::warn!("an answer not passed to the other replicas: {e}");
    }
}

/// Acts on what another replica published: cancels a call running here,
/// or hands an answer to the call here that asked.
pub(super) fn from_other_replicas(
    sessions: Sessions,
    questions: Questions,
    changes: ResourceChanges,
    node: String,
) -> Handler {
    Arc::new(move |message| match message {
        BusMessage::Updated { uri, from } => {
            if from != node {
                changes.updated_elsewhere(&uri);
            }
        }
        BusMessage::Cancel { session, request } => {
            if let Some(s) = sessions.local(&session)
                && s.cancel(&request)
            {
                tracing::debug!(%request, "cancelled at another replica's word");
            }
        }
        BusMessage::Answer {
            session,
            id,
            result,
            error,
        } => {
            let outcome = match error {
                Some(e) => Err(e),
                None => Ok(result.unwrap_or(Value::Null)),
            };
            questions.answer(&id, session.as_deref(), outcome);
        }
    })
}

/// Publishes each resource update a guest announces here, for the
/// sessions whose GET stream is on another replica.
pub(super) fn to_other_replicas(cluster: &Arc<Cluster>) -> Forward {
    let cluster = cluster.clone();
    Arc::new(move |uri: &str| {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let message = BusMessage::Updated {
            uri: uri.to_string(),
            from: cluster.node().to_string(),
        };
        let cluster = cluster.clone();
        runtime.spawn(async move {
            if let Err(e) = cluster.publish(&message).await {
                tracing::warn!("a resource update not passed to the other replicas: {e}");
            }
        });
    })
}

//! The tasks extension's methods under 2026-07-28: a `tools/call` answered
//! as a task (`CreateTaskResult`), and `tasks/get`, `tasks/cancel`,
//! `tasks/update`. The records themselves are kept by [`super::tasks`].

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::codes::MISSING_CAPABILITY;
use super::front::Modern;
use super::meta::RequestMeta;
use super::result::server_info;
use super::state::{caller, digest};
use super::tasks::{EXTENSION, POLL_INTERVAL_MS, Record, Status, TAG_LEN, TTL_MS, Tasks, now};
use crate::mcp::jsonrpc::{self, RpcError};
use crate::mcp::methods::Method;
use crate::mcp::reply::{json_response, reply};
use crate::mcp::request::Request;
use crate::mcp::state::McpState;
use hangar_core::call::{Askable, EventSink};

/// Whose quota a new task of the tool `name` counts against: the caller's
/// principal, or its client address when anonymous; as a tag.
async fn quota_tag(st: &McpState, req: &Request<'_>, name: &str) -> String {
    let principal = match &req.token {
        Some(token) => Some(token.clone()),
        None => {
            let cx = req.context(st);
            st.pipeline.current().caller(name, &cx).await
        }
    };
    let who = match principal {
        Some(p) => json!(format!("sub:{}", p.subject)),
        None => json!(format!(
            "ip:{}",
            hangar_core::call::client_key(req.client.ip())
        )),
    };
    let mut tag = digest(&[&json!("task-quota"), &who]);
    tag.truncate(TAG_LEN);
    tag
}

/// -32021 (HTTP 400) naming the tasks extension.
pub(super) fn missing_extension(req: &Request<'_>, why: &str) -> Response {
    let error = RpcError {
        code: MISSING_CAPABILITY,
        message: format!("Missing required client capability: extension {EXTENSION} ({why})"),
        data: Some(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } })),
    };
    json_response(
        StatusCode::BAD_REQUEST,
        jsonrpc::error_body(&req.id, &error),
    )
}

/// Digest of the credentials a request carries: who owns a task.
pub(super) fn owner(req: &Request<'_>) -> String {
    let [authorization, api_key, subject] = caller(req);
    digest(&[&json!("task-owner"), &authorization, &api_key, &subject])
}

/// Whether a modern `tools/call` is answered here: as a task (the tool
/// runs as one and the client declared the extension), or with -32021 (the
/// tool requires one and the client did not). `None`: a plain call, or a
/// request whose tool name or arguments the plain call refuses.
pub(super) async fn tools_call(
    st: &McpState,
    modern: &Modern,
    meta: &RequestMeta,
    req: &Request<'_>,
) -> Option<Response> {
    let name = req.params.get("name").and_then(Value::as_str)?;
    let args = req.params.get("arguments").cloned().unwrap_or(Value::Null);
    if !(args.is_object() || args.is_null()) {
        return None;
    }
    let pipeline = st.pipeline.current();
    // A tool outside the request's toolset is answered by the plain call.
    pipeline.resolve(name, req.toolset.as_ref()).ok()?;
    let support = pipeline.catalog().task_support(name)?;
    if !modern.tasks.available() {
        return None;
    }
    if !meta.declares_extension(EXTENSION) {
        return match support {
            hangar_config::TaskSupport::Optional => None,
            hangar_config::TaskSupport::Required => Some(missing_extension(
                req,
                &format!("the tool {name} runs only as a task"),
            )),
        };
    }
    Some(create(st, &modern.tasks, meta, req, name, args).await)
}

/// Stores a new task, starts the call, and answers `CreateTaskResult`.
async fn create(
    st: &McpState,
    tasks: &Arc<Tasks>,
    meta: &RequestMeta,
    req: &Request<'_>,
    name: &str,
    args: Value,
) -> Response {
    let at = now();
    let tag = quota_tag(st, req, name).await;
    let record = Record {
        task_id: format!("{tag}.{}", uuid::Uuid::new_v4()),
        status: Status::Working,
        status_message: None,
        created_at: at.clone(),
        last_updated_at: at,
        ttl_ms: TTL_MS,
        poll_interval_ms: POLL_INTERVAL_MS,
        result: None,
        error: None,
        input_requests: None,
        owner: owner(req),
        boot: tasks.boot.clone(),
    };
    // Durable before the client hears of it: `tasks/get` answers at once.
    if let Err(e) = tasks.put(&record).await {
        return req.fail(&e);
    }
    let mut cx = req.context(st);
    let id = record.task_id.clone();
    // Questions to the client park the task (`input_required`) until
    // `tasks/update` answers them; other events have no reader.
    let (tx, asks) = tokio::sync::mpsc::channel(16);
    cx.events = EventSink::new(tx, None, false).with_askable(Askable::Yes {
        elicitation: meta.declares("elicitation"),
        elicitation_url: false,
        sampling: meta.declares("sampling"),
        roots: meta.declares("roots"),
    });
    let changes = st.pipeline.current().changes().clone();
    tokio::spawn(super::task_input::park_questions(
        tasks.clone(),
        id.clone(),
        asks,
        changes,
    ));
    tasks
        .running
        .lock()
        .unwrap()
        .insert(id.clone(), cx.cancel.clone());
    let (pipeline, tasks, errors) = (st.pipeline.current(), tasks.clone(), st.errors);
    let tool = name.to_string();
    tokio::spawn(async move {
        let outcome = pipeline.call(&tool, args, &mut cx).await;
        let changes = pipeline.changes().clone();
        tasks.settle(&id, outcome, errors, &changes).await;
    });
    let mut created = record.wire();
    created["resultType"] = json!("task");
    created["_meta"] = json!({ "io.modelcontextprotocol/serverInfo": server_info() });
    reply(&req.id, &created)
}

/// `tasks/get`, `tasks/cancel` and `tasks/update`.
pub(super) async fn handle(
    st: &McpState,
    modern: &Modern,
    meta: &RequestMeta,
    req: &Request<'_>,
    method: Method,
) -> Response {
    let tasks = &modern.tasks;
    let method_name = method.name();
    if !meta.declares_extension(EXTENSION) {
        return missing_extension(req, &format!("{method_name} needs it"));
    }
    let Some(id) = req.params.get("taskId").and_then(Value::as_str) else {
        return req.fail(&RpcError::invalid_params(format!(
            "{method_name} needs a taskId"
        )));
    };
    let owner = owner(req);
    let record = match tasks.owned(id, &owner).await {
        Ok(r) => r,
        Err(e) => return req.fail(&e),
    };
    match method {
        Method::TasksGet => req.reply(&record.wire()),
        Method::TasksCancel => {
            if !record.status.terminal() {
                if let Some(cancel) = tasks.running.lock().unwrap().get(id) {
                    cancel.cancel();
                }
                tasks.waiting.forget(id);
                let _writing = tasks.writing.lock().await;
                // Read again under the lock: the run may have ended meanwhile.
                if let Ok(Some(mut now)) = tasks.load(id).await
                    && !now.status.terminal()
                {
                    now.input_requests = None;
                    now.set(Status::Cancelled, Some("cancelled by the client".into()));
                    if let Err(e) = tasks.put(&now).await {
                        return req.fail(&e);
                    }
                    let changes = st.pipeline.current().changes().clone();
                    changes.task(id, &now.owner, now.wire());
                }
            }
            req.reply(&json!({}))
        }
        // `tasks/update`: answers to waiting questions resume the guest; others are ignored.
        _ => match req.params.get("inputResponses") {
            None => req.reply(&json!({})),
            Some(Value::Object(answers)) => {
                let changes = st.pipeline.current().changes().clone();
                match super::task_input::answer(tasks, id, answers, &changes).await {
                    Ok(()) => req.reply(&json!({})),
                    Err(e) => req.fail(&e),
                }
            }
            Some(_) => req.fail(&RpcError::invalid_params(
                "inputResponses must be an object",
            )),
        },
    }
}

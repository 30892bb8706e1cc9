//! `MapperPlugin`: a loaded component of the `mapper` world.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{Component, Linker};

use super::bindings::mapper::MapperPre;
use super::limits;
use super::sched::{Pool, Scheduler};
use super::state::{self, GuestState, PluginMeta};
use super::tool::{output_within, wit_context};
use crate::config::Limits;
use crate::pipeline::{CallContext, CallError, ErrorKind, Stage};

/// A mapper, instantiated fresh for every payload it maps.
pub struct MapperPlugin {
    meta: PluginMeta,
    pre: MapperPre<GuestState>,
    sched: Arc<Scheduler>,
}

impl MapperPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
        sched: Arc<Scheduler>,
    ) -> anyhow::Result<MapperPlugin> {
        let pre = MapperPre::new(state::instance_pre(linker, component)?)
            .map_err(|e| anyhow::anyhow!("not a mapper component: {e:?}"))?;
        Ok(MapperPlugin { meta, pre, sched })
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Runs `map` on a JSON payload; the answer must be JSON too, and no
    /// larger than `max_output_bytes`.
    pub async fn map(
        &self,
        stage: Stage,
        payload: &serde_json::Value,
        cx: &CallContext,
        limits: &Limits,
    ) -> Result<serde_json::Value, CallError> {
        let until = Instant::now() + limits.queue_timeout;
        let _slot = self.sched.slot(Pool::Stages, until, stage).await?;
        let mut store = state::store(
            self.pre.engine(),
            &self.meta,
            limits,
            &cx.cancel,
            cx.events.clone(),
            super::tool::trace(cx),
            &self.sched,
        );
        let deadline = store.data().deadline;
        let (wit_cx, payload) = (wit_context(cx), payload.to_string());
        let out = limits::bounded(deadline, limits, &cx.cancel, stage, async {
            let mapper = self.pre.instantiate_async(&mut store).await?;
            mapper.call_map(&mut store, &wit_cx, &payload).await
        })
        .await;
        limits::log_stderr(&store);
        let failed = |m: String| {
            CallError::new(
                stage,
                ErrorKind::Failed,
                format!("mapper {}: {m}", self.meta.name),
            )
        };
        let answer = limits::settle(out, &store, stage, limits, &cx.cancel).and_then(|out| {
            if let Ok(text) = &out {
                output_within(text.len(), limits, stage)?;
            }
            Ok(out)
        });
        match answer {
            Ok(Ok(text)) => serde_json::from_str(&text)
                .map_err(|e| failed(format!("answered invalid JSON: {e}"))),
            Ok(Err(e)) => Err(failed(e.message)),
            Err(mut err) => {
                if err.kind != ErrorKind::Cancelled {
                    err.message = format!("mapper {}: {}", self.meta.name, err.message);
                }
                Err(err)
            }
        }
    }
}

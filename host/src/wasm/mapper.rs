//! `MapperPlugin`: a loaded component of the `mapper` world.

use wasmtime::component::{Component, Linker};

use super::bindings::mapper::MapperPre;
use super::limits;
use super::state::{self, GuestState, PluginMeta};
use super::tool::wit_context;
use crate::config::Limits;
use crate::pipeline::{CallContext, CallError, ErrorKind, Stage};

/// A mapper, instantiated fresh for every payload it maps.
pub struct MapperPlugin {
    meta: PluginMeta,
    pre: MapperPre<GuestState>,
}

impl MapperPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
    ) -> anyhow::Result<MapperPlugin> {
        let pre = MapperPre::new(state::instance_pre(linker, component)?)
            .map_err(|e| anyhow::anyhow!("not a mapper component: {e:?}"))?;
        Ok(MapperPlugin { meta, pre })
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Runs `map` on a JSON payload; the answer must be JSON too.
    pub async fn map(
        &self,
        stage: Stage,
        payload: &serde_json::Value,
        cx: &CallContext,
        limits: &Limits,
    ) -> Result<serde_json::Value, CallError> {
        let mut store = state::store(
            self.pre.engine(),
            &self.meta,
            limits,
            &cx.cancel,
            cx.events.clone(),
        );
        let out = match self.pre.instantiate_async(&mut store).await {
            Ok(mapper) => {
                mapper
                    .call_map(&mut store, &wit_context(cx), &payload.to_string())
                    .await
            }
            Err(e) => Err(e),
        };
        limits::log_stderr(&self.meta.name, &store);
        let failed = |m: String| {
            CallError::new(
                stage,
                ErrorKind::Failed,
                format!("mapper {}: {m}", self.meta.name),
            )
        };
        match out {
            Ok(Ok(text)) => serde_json::from_str(&text)
                .map_err(|e| failed(format!("answered invalid JSON: {e}"))),
            Ok(Err(e)) => Err(failed(e.message)),
            Err(e) => {
                let mut err = limits::classify(e, &store, stage, limits, &cx.cancel);
                if err.kind != ErrorKind::Cancelled {
                    err.message = format!("mapper {}: {}", self.meta.name, err.message);
                }
                Err(err)
            }
        }
    }
}

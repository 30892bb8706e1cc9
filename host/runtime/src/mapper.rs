//! `MapperPlugin`: a loaded component of the `mapper` world.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasmtime::component::{Component, Linker};

use super::bindings::mapper::{Mapper, MapperPre};
use super::convert::wit_context;
use super::guest_state::{GuestState, PluginMeta};
use super::linking;
use super::sched::Scheduler;
use super::stage::StageComponent;
use super::tool::output_within;
use hangar_config::Limits;
use hangar_core::call::{CallContext, CallError, ErrorKind, Stage};

/// A mapper, instantiated fresh for every payload it maps (or kept warm
/// between payloads when the operator opted into `instances.reuse`).
pub struct MapperPlugin(StageComponent<MapperPre<GuestState>, Mapper>);

impl MapperPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
        sched: Arc<Scheduler>,
    ) -> anyhow::Result<MapperPlugin> {
        let pre = MapperPre::new(linking::instance_pre(linker, component)?)
            .map_err(|e| anyhow::anyhow!("not a mapper component: {e:?}"))?;
        let engine = pre.engine().clone();
        Ok(MapperPlugin(StageComponent::new(meta, pre, engine, sched)))
    }

    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// Runs `map` on `payload`, serialized once; the answer must be JSON
    /// of shape `T` (`what` names it in the error), and no larger than
    /// `max_output_bytes`. The answer is read straight into `T`, with no
    /// `Value` in between.
    pub async fn map<P: Serialize, T: DeserializeOwned>(
        &self,
        stage: Stage,
        payload: &P,
        what: &str,
        cx: &CallContext,
        limits: &Limits,
    ) -> Result<T, CallError> {
        let failed = |m: String| {
            CallError::new(
                stage,
                ErrorKind::Failed,
                format!("mapper {}: {m}", self.name()),
            )
        };
        let payload = serde_json::to_string(payload)
            .map_err(|e| failed(format!("payload cannot be serialized: {e}")))?;
        let wit_cx = wit_context(cx);
        let answer = self
            .0
            .run(
                stage,
                cx,
                limits,
                cx.events.clone(),
                async |pre, store| pre.instantiate_async(store).await,
                async |mapper, store| mapper.call_map(store, &wit_cx, &payload).await,
            )
            .await
            .and_then(|out| {
                if let Ok(text) = &out {
                    output_within(text.len(), limits, stage)?;
                }
                Ok(out)
            });
        match answer {
            Ok(Ok(text)) => serde_json::from_str(&text).map_err(|e| {
                if e.is_data() {
                    failed(format!("answered no {what}: {e}"))
                } else {
                    failed(format!("answered invalid JSON: {e}"))
                }
            }),
            Ok(Err(e)) => Err(failed(e.message)),
            Err(mut err) => {
                if err.kind != ErrorKind::Cancelled {
                    err.message = format!("mapper {}: {}", self.name(), err.message);
                }
                Err(err)
            }
        }
    }
}

//! Whether a call's span is kept: `OTEL_TRACES_SAMPLER`, with the two
//! samplers that keep every trace they may decided here.

use opentelemetry::trace::{SpanContext, SpanKind, TraceContextExt, TraceId};
use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};

/// How calls are sampled. The two samplers that keep every trace they
/// may (the default, `parentbased_always_on`, and `always_on`) are decided
/// here; any other is the SDK's, as `OTEL_TRACES_SAMPLER` names it. Asking
/// the SDK's sampler costs a call a dynamic call and, under a parent, a
/// `Context` built for it, to learn what the parent's flag already says.
pub(super) enum Sampling {
    /// `always_on`: every call is sampled.
    Always,
    /// `parentbased_always_on`: a call follows its parent's sampled flag;
    /// one without a parent is sampled.
    ParentOrAlways,
    Sdk(Box<dyn ShouldSample>),
}

impl Sampling {
    /// From `OTEL_TRACES_SAMPLER`, read as the SDK reads it (which built
    /// `sdk` from it): unset means `parentbased_always_on`.
    pub(super) fn from_env(sdk: Box<dyn ShouldSample>) -> Sampling {
        match std::env::var("OTEL_TRACES_SAMPLER").as_deref() {
            Err(_) | Ok("parentbased_always_on") => Sampling::ParentOrAlways,
            Ok("always_on") => Sampling::Always,
            Ok(_) => Sampling::Sdk(sdk),
        }
    }

    /// Whether a call of `tool` in `trace_id` under `parent` (a valid one) is sampled.
    pub(super) fn sampled(
        &self,
        parent: Option<&SpanContext>,
        trace_id: TraceId,
        tool: &str,
    ) -> bool {
        match self {
            Sampling::Always => true,
            Sampling::ParentOrAlways => parent.is_none_or(|p| p.is_sampled()),
            Sampling::Sdk(sampler) => {
                // The sampler takes a parent `Context`: built only when
                // there is a parent (an incoming traceparent or an outer
                // call), not per call.
                let parent_cx = parent
                    .map(|p| opentelemetry::Context::new().with_remote_span_context(p.clone()));
                let decision = sampler
                    .should_sample(
                        parent_cx.as_ref(),
                        trace_id,
                        tool,
                        &SpanKind::Server,
                        &[],
                        &[],
                    )
                    .decision;
                decision == SamplingDecision::RecordAndSample
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::context_of;
    use opentelemetry::trace::SpanId;

    #[test]
    fn the_samplers_decided_here_decide_as_the_sdks() {
        use opentelemetry_sdk::trace::Sampler;
        let trace_id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        let parent =
            |sampled| context_of(trace_id, SpanId::from_bytes(7u64.to_be_bytes()), sampled);
        let (on, off) = (parent(true), parent(false));
        let pairs = [
            (
                Sampling::ParentOrAlways,
                Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            ),
            (Sampling::Always, Sampler::AlwaysOn),
        ];
        for (here, sdk) in pairs {
            let sdk = Sampling::Sdk(Box::new(sdk));
            for parent in [None, Some(&on), Some(&off)] {
                assert_eq!(
                    here.sampled(parent, trace_id, "echo"),
                    sdk.sampled(parent, trace_id, "echo"),
                    "under {parent:?}"
                );
            }
        }
        // And the cases that tell them apart decide as expected.
        assert!(!Sampling::ParentOrAlways.sampled(Some(&off), trace_id, "echo"));
        assert!(Sampling::Always.sampled(Some(&off), trace_id, "echo"));
        assert!(Sampling::ParentOrAlways.sampled(None, trace_id, "echo"));
    }
}

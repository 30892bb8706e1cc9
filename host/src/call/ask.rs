//! Questions a running call puts to its MCP client: user input
//! (`elicitation/create`) and LLM completions (`sampling/createMessage`).
//! A guest asks through its call's [`EventSink`](super::EventSink); the
//! surface that carries the call's stream sends the question and routes the
//! client's answer back. Nothing here knows how (SSE request today; an
//! input-required round in the 2026-07-28 revision).

use std::time::Instant;

use serde_json::Value;
use tokio::sync::oneshot;

/// What the client can be asked on this call, or why it cannot be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Askable {
    /// The client declared these capabilities and reads the call's stream.
    Yes { elicitation: bool, sampling: bool },
    /// Why no question can reach the client on this call.
    No(&'static str),
}

impl Default for Askable {
    fn default() -> Self {
        Askable::No("this call has no MCP client to ask (a REST call, or a call without a stream)")
    }
}

/// The kinds of question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskKind {
    Elicit,
    Sample,
}

impl AskKind {
    /// The JSON-RPC method the client answers.
    pub fn method(self) -> &'static str {
        match self {
            AskKind::Elicit => "elicitation/create",
            AskKind::Sample => "sampling/createMessage",
        }
    }

    fn capability(self) -> &'static str {
        match self {
            AskKind::Elicit => "elicitation",
            AskKind::Sample => "sampling",
        }
    }
}

/// One question on its way to the client, with where its answer goes.
#[derive(Debug)]
pub struct Ask {
    pub kind: AskKind,
    /// The request's `params`.
    pub params: Value,
    pub answer: oneshot::Sender<Result<Value, AskError>>,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum AskError {
    /// The client cannot be asked this (capability not declared, no stream).
    Unsupported(String),
    /// The client answered with an error, or went away.
    Failed(String),
    /// No answer before the call's deadline.
    Timeout,
}

impl Askable {
    /// Whether `kind` may be asked; the error says why not.
    pub fn check(self, kind: AskKind) -> Result<(), AskError> {
        match self {
            Askable::No(why) => Err(AskError::Unsupported(why.to_string())),
            Askable::Yes {
                elicitation,
                sampling,
            } => {
                let declared = match kind {
                    AskKind::Elicit => elicitation,
                    AskKind::Sample => sampling,
                };
                if declared {
                    Ok(())
                } else {
                    Err(AskError::Unsupported(format!(
                        "the client did not declare the {} capability",
                        kind.capability()
                    )))
                }
            }
        }
    }
}

/// How long a question may wait: until shortly before the call's deadline,
/// so the guest can still report the timeout before the deadline stops it.
pub fn ask_until(deadline: Instant) -> Instant {
    let left = deadline.saturating_duration_since(Instant::now());
    deadline - (left / 10).min(std::time::Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undeclared_capability_is_unsupported() {
        let caps = Askable::Yes {
            elicitation: true,
            sampling: false,
        };
        assert_eq!(caps.check(AskKind::Elicit), Ok(()));
        assert!(
            matches!(caps.check(AskKind::Sample), Err(AskError::Unsupported(m)) if m.contains("sampling"))
        );
        assert!(matches!(
            Askable::default().check(AskKind::Elicit),
            Err(AskError::Unsupported(_))
        ));
    }
}

//! Questions a running call puts to its MCP client: user input
//! (`elicitation/create`), LLM completions (`sampling/createMessage`) and
//! the client's roots (`roots/list`).
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
    Yes {
        elicitation: bool,
        /// URL-mode elicitation: the client opens a URL for the user.
        elicitation_url: bool,
        sampling: bool,
        roots: bool,
    },
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
pub enum QuestionKind {
    Elicit,
    /// An elicitation in URL mode (`mode: "url"`).
    ElicitUrl,
    Sample,
    Roots,
}

impl QuestionKind {
    /// The JSON-RPC method the client answers.
    pub fn method(self) -> &'static str {
        match self {
            QuestionKind::Elicit | QuestionKind::ElicitUrl => "elicitation/create",
            QuestionKind::Sample => "sampling/createMessage",
            QuestionKind::Roots => "roots/list",
        }
    }

    /// The client capability that says it answers this kind.
    pub fn capability(self) -> &'static str {
        match self {
            QuestionKind::Elicit => "elicitation",
            QuestionKind::ElicitUrl => "elicitation (url mode)",
            QuestionKind::Sample => "sampling",
            QuestionKind::Roots => "roots",
        }
    }
}

/// One question on its way to the client, with where its answer goes.
#[derive(Debug)]
pub struct Question {
    pub kind: QuestionKind,
    /// The name the guest gave the question, if any (a checked
    /// [`question_key`]); protocol 2026-07-28 uses it as the question's key.
    pub key: Option<String>,
    /// The request's `params`.
    pub params: Value,
    pub answer: oneshot::Sender<Result<Value, QuestionError>>,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionError {
    /// The client cannot be asked this (capability not declared, no stream).
    Unsupported(String),
    /// The client answered with an error, or went away.
    Failed(String),
    /// No answer before the call's deadline.
    Timeout,
}

impl Askable {
    /// Whether `kind` may be asked; the error says why not.
    pub fn check(self, kind: QuestionKind) -> Result<(), QuestionError> {
        match self {
            Askable::No(why) => Err(QuestionError::Unsupported(why.to_string())),
            Askable::Yes {
                elicitation,
                elicitation_url,
                sampling,
                roots,
            } => {
                let declared = match kind {
                    QuestionKind::Elicit => elicitation,
                    QuestionKind::ElicitUrl => elicitation_url,
                    QuestionKind::Sample => sampling,
                    QuestionKind::Roots => roots,
                };
                if declared {
                    Ok(())
                } else {
                    Err(QuestionError::Unsupported(format!(
                        "the client did not declare the {} capability",
                        kind.capability()
                    )))
                }
            }
        }
    }
}

/// Checks a question key a guest chose: 1 to 64 characters of
/// `A-Z a-z 0-9 _ - .`.
pub fn question_key(key: &str) -> Result<(), QuestionError> {
    let fits = (1..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if fits {
        Ok(())
    } else {
        Err(QuestionError::Failed(format!(
            "question key {key:?} must be 1 to 64 characters of A-Z a-z 0-9 _ - ."
        )))
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
            elicitation_url: false,
            sampling: false,
            roots: false,
        };
        assert_eq!(caps.check(QuestionKind::Elicit), Ok(()));
        // Form mode declared, URL mode not: a URL is not asked.
        assert!(
            matches!(caps.check(QuestionKind::ElicitUrl), Err(QuestionError::Unsupported(m)) if m.contains("url mode"))
        );
        assert!(
            matches!(caps.check(QuestionKind::Sample), Err(QuestionError::Unsupported(m)) if m.contains("sampling"))
        );
        assert!(
            matches!(caps.check(QuestionKind::Roots), Err(QuestionError::Unsupported(m)) if m.contains("roots"))
        );
        assert!(matches!(
            Askable::default().check(QuestionKind::Elicit),
            Err(QuestionError::Unsupported(_))
        ));
    }

    #[test]
    fn question_keys_are_checked() {
        assert!(question_key("user_name").is_ok());
        assert!(question_key("a.b-c_1").is_ok());
        assert!(question_key("").is_err());
        assert!(question_key("has space").is_err());
        assert!(question_key(&"k".repeat(65)).is_err());
    }
}

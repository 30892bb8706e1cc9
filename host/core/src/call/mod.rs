//! The call vocabulary: what a call carries ([`CallContext`]), how it ends
//! ([`ToolResult`], [`CallError`]), what it may ask of the client
//! ([`Question`]) and what it may announce ([`ResourceChanges`]).
//!
//! Every other layer speaks these words and this module imports none of
//! them, so the layers run one way: surfaces (`mcp`, `rest`) → `pipeline`
//! → `catalog` → backends (`wasm`, `db`, `upstream`) → `call`.

pub mod apps;
mod cancel;
mod changes;
mod client;
mod context;
mod error;
mod events;
mod offers;
pub mod pins;
mod principal;
mod program;
mod question;
mod request;
mod result;
mod tick;
mod tool;
mod toolset;
mod usage;

pub use cancel::{CancelOnDrop, CancelToken};
pub use changes::{Change, Forward, List, Reach, ResourceChanges};
pub use client::client_key;
pub use context::CallContext;
pub use error::{CallError, ErrorKind, Stage};
pub use events::{CallEvent, EventSink, LogLevel};
pub use offers::{
    CompletionRef, Completions, MAX_COMPLETIONS, PromptArgument, PromptDef, PromptMessage,
    PromptResult, ReadResult, ResourceDef, Role, TemplateDef,
};
pub use principal::{AccessToken, Principal};
pub use program::{ProgramCall, ProgramCalls};
pub use question::{Askable, Question, QuestionError, QuestionKind, ask_until, question_key};
pub use request::{RequestInfo, Surface};
pub use result::{Content, HINTS_META, ResourceContents, TRUNCATED_META, ToolResult};
pub use tick::Tick;
pub use tool::{Annotations, Meta, ToolDef, json_kind};
pub use toolset::Toolset;
pub use usage::CallUsage;

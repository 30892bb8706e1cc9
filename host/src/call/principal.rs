//! Who is calling: the subject and claims the auth stage found.

use serde::Serialize;

/// Who is calling, once the auth stage has said so.
#[derive(Debug, Clone, Serialize)]
pub struct Principal {
    pub subject: String,
    pub claims: serde_json::Value,
}

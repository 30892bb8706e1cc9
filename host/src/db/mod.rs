//! DB-backed tools and resources: one SQL statement each, run natively in
//! the host on a configured connector, with an optional result cache.
//!
//! `connectors` opens the databases (`[connectors.NAME]`) and runs a
//! statement on one; `tool` is the statement a `[[tools]]` or
//! `[[resources]]` entry defines, run for a call. The other files are what
//! those lean on: the inputs' check, the compiled template, the result
//! cache and its shared tier, and each database's driver.

mod cache;
mod connectors;
mod inputs;
mod outcome;
mod pg_numeric;
mod pg_tls;
mod postgres;
mod shared;
mod sqlite;
pub mod template;
mod tool;

pub use cache::CacheStats;
pub use connectors::{Connector, Connectors};
pub use outcome::{DbFailure, Rows};
pub use tool::DbTool;

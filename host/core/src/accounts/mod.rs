//! Each user's own accounts at per-user providers (`[credentials.NAME]`
//! kind `oauth2-user` or `user-key`): connecting them (`flows`), keeping
//! them sealed in the kv store (`seal`), and resolving a provider's value
//! for the caller of a tool, source by source.
//!
//! `resolve` answers a provider's value for a caller; `flows` connects and
//! disconnects; `connections` holds the types and the sealed rows. Beside
//! them: personal tokens (`tokens`, and `command`: `hangar token`), and
//! token exchange for upstreams called on a caller's behalf (`exchange`).
//!
//! One `Accounts` lives as long as the process (its refresh locks do); each
//! load hands it the providers of the config it loaded ([`Accounts::configure`]).
//! Connections live in the kv store — the embedded SQLite by default, Redis
//! with `[cluster]` — so one made through one replica serves all of them.
//! A connection's row is keyed by provider and a digest of the subject;
//! its value is sealed and bound to both.
//!
//! Tokens never leave through here except as the value `resolve` answers a
//! granted guest: not in errors, logs or listings.

mod command;
mod connections;
mod exchange;
mod flows;
mod locks;
mod provider;
mod resolve;
mod seal;
mod tokens;

pub use command::TokenCommand;
pub use connections::{Accounts, UserProvider};
pub use exchange::{ExchangeSettings, Exchanger};
pub use flows::{ConnectError, Next, Started, Status};
pub use resolve::Unresolved;
pub use tokens::{TokenRecord, TokenRefusal, Tokens};

#[cfg(test)]
mod tests;

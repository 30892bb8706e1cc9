//! The 2026-07-28 revision's version list and error codes, below
//! everything else in `modern` that names them.

/// Modern revisions this server speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// `HeaderMismatch`: a mirrored header is missing or differs from the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// `MissingRequiredClientCapability`: the request needs a capability the
/// client did not declare in `_meta`.
pub const MISSING_CAPABILITY: i64 = -32021;
/// `UnsupportedProtocolVersion`.
pub const UNSUPPORTED_VERSION: i64 = -32022;

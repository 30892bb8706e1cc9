//! Why a file in `[files] shared_dir` was not taken (see `handoff`).

/// Why a file an upstream named or returned was not taken.
#[derive(Debug, PartialEq)]
pub enum Untaken {
    /// It is not a plain file of the shared folder this call may take.
    Outside(String),
    /// It is not there.
    Missing,
    /// Larger than `[artifacts] max_file_bytes`.
    TooLarge(u64),
    /// The disk failed.
    Io(String),
}

impl std::fmt::Display for Untaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untaken::Outside(why) => {
                write!(f, "outside what may be taken: {why}; nothing was read")
            }
            Untaken::Missing => f.write_str("no file there"),
            Untaken::TooLarge(max) => write!(f, "larger than [artifacts] max_file_bytes ({max})"),
            Untaken::Io(why) => f.write_str(why),
        }
    }
}

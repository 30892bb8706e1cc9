//! Files in `[files] shared_dir`, where an upstream server reads the uploads
//! it is handed and leaves what it produces.
//!
//! The upstream can write anywhere in that folder, so what is there is as
//! hostile as the upstream itself: a path it names may lead out through a
//! symlink, a folder may be swapped for a symlink between a check and a use,
//! a hard link may bring in a file from elsewhere on the disk. So a file is
//! read only when, opened without following a final symlink, the path the
//! kernel opened (`/proc/self/fd`) is inside the folder, it is a regular file
//! and it has one link; and bytes are written only through a folder handle
//! opened the same way, into a new file. The upstream can still spoil what
//! it was handed; it cannot make Hangar read or write outside the folder.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Entry, Files, Untaken, check_name};

impl Files {
    /// `[files] shared_dir`, by its real path.
    pub fn shared_dir(&self) -> Option<&Path> {
        self.shared_dir.as_deref()
    }

    /// Takes the file at `path` (absolute, or relative to the shared folder)
    /// into `folder` (a call's artifacts folder) and answers its name there.
    /// Only a file in `folder`, or in the shared folder outside its
    /// `uploads/` and `artifacts/` (which hold other sessions' files), is
    /// taken.
    pub fn take_file(&self, folder: &Path, path: &str) -> Result<String, Untaken> {
        let shared = self
            .shared_dir
            .as_deref()
            .ok_or_else(|| Untaken::Outside("no [files] shared_dir".into()))?;
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            shared.join(given)
        };
        // Symlinks resolved before the check, so none leads out unseen.
        let real = match joined.canonicalize() {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Untaken::Missing),
            Err(e) => return Err(Untaken::Io(format!("{path}: {e}"))),
        };
        self.may_take(folder, &real)?;
        let file = open_read(&real).map_err(|e| Untaken::Io(format!("{path}: {e}")))?;
        // The path as opened: a folder swapped for a symlink since the
        // check shows here.
        if let Some(opened) = opened_path(&file) {
            self.may_take(folder, &opened)?;
        }
        let max = self.artifacts.quota.max_file_bytes;
        let meta = file.metadata().map_err(|e| Untaken::Io(e.to_string()))?;
        plain_file(&meta)?;
        if meta.len() > max {
            return Err(Untaken::TooLarge(max));
        }
        let name = real
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| check_name(n).is_ok())
            .unwrap_or("output")
            .to_string();
        if real.parent() == Some(folder) {
            return Ok(name);
        }
        let mut bytes = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Untaken::Io(e.to_string()))?;
        if bytes.len() as u64 > max {
            return Err(Untaken::TooLarge(max));
        }
        self.keep_bytes(folder, &name, &bytes)
    }

    /// Writes `bytes` an upstream returned inline into `folder` as `name`
    /// (a name that cannot be kept becomes `output`), and answers the name.
    pub fn keep_bytes(&self, folder: &Path, name: &str, bytes: &[u8]) -> Result<String, Untaken> {
        let max = self.artifacts.quota.max_file_bytes;
        if bytes.len() as u64 > max {
            return Err(Untaken::TooLarge(max));
        }
        let name = if check_name(name).is_ok() {
            name
        } else {
            "output"
        };
        write_new(folder, name, bytes).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                Untaken::Outside(format!("{name} is already in the call's folder"))
            }
            _ => Untaken::Io(format!("cannot keep {name}: {e}")),
        })?;
        Ok(name.to_string())
    }

    /// Removes from `folder` what is not a plain file with one link, before
    /// its files are kept as artifacts: the upstream put it there.
    pub fn clear_strays(&self, folder: &Path) {
        let Ok(entries) = std::fs::read_dir(folder) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if plain_file(&meta).is_ok() => {}
                Ok(meta) if meta.is_dir() => {
                    let _ = std::fs::remove_dir_all(&path);
                }
                _ => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }

    /// The bytes of a stored file. In the shared folder, the file must still
    /// be where it was stored, plain and with one link: the upstream may
    /// have swapped it since.
    pub async fn read_entry(&self, entry: &Entry) -> std::io::Result<Vec<u8>> {
        if self.shared_dir.is_none() {
            return super::read(entry.path()).await;
        }
        let path = entry.path().to_path_buf();
        let size = entry.size;
        super::blocking(move || {
            let refused = || std::io::Error::other("the stored file was changed");
            let file = open_read(&path)?;
            if opened_path(&file).is_some_and(|opened| opened != path) {
                return Err(refused());
            }
            if plain_file(&file.metadata()?).is_err() {
                return Err(refused());
            }
            // No more than it held when stored: a file grown since was changed.
            let mut bytes = Vec::new();
            (&file).take(size + 1).read_to_end(&mut bytes)?;
            if bytes.len() as u64 != size {
                return Err(refused());
            }
            Ok(bytes)
        })
        .await
    }

    /// Whether the file at real path `real` may be taken into `folder`.
    fn may_take(&self, folder: &Path, real: &Path) -> Result<(), Untaken> {
        let shared = self.shared_dir.as_deref().unwrap_or(folder);
        if real.starts_with(folder) {
            return Ok(());
        }
        if !real.starts_with(shared) {
            return Err(Untaken::Outside(format!(
                "{} is not in [files] shared_dir",
                real.display()
            )));
        }
        if real.starts_with(&self.uploads.dir) || real.starts_with(&self.artifacts.dir) {
            return Err(Untaken::Outside(format!(
                "{} is another call's upload or artifact",
                real.display()
            )));
        }
        Ok(())
    }
}

/// A regular file with one link (a second link may be a file from outside).
fn plain_file(meta: &std::fs::Metadata) -> Result<(), Untaken> {
    if !meta.is_file() {
        return Err(Untaken::Outside("not a regular file".into()));
    }
    if meta.nlink() != 1 {
        return Err(Untaken::Outside("a file with more than one link".into()));
    }
    Ok(())
}

/// Opens for reading, not following a final symlink, and without blocking
/// on a FIFO (refused after, as not a regular file).
fn open_read(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// The path the kernel opened `file` at (Linux; elsewhere `None`).
fn opened_path(file: &File) -> Option<PathBuf> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// Creates `folder/name` with `bytes`: the folder opened without following
/// a symlink and checked to be where it should be, the file created new in
/// it (never through an existing file or link).
fn write_new(folder: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(folder)?;
    if opened_path(&dir).is_some_and(|opened| opened != folder) {
        return Err(std::io::Error::other("the call's folder was moved"));
    }
    let name = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `dir` is an open directory descriptor and `name` a
    // NUL-terminated string, both alive for the call; the descriptor
    // returned is owned by the `File` made from it, and by nothing else.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o644) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened above and is not owned elsewhere.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_config::Config;

    fn files(shared: &Path) -> Files {
        let mut config = Config::default();
        config.files.shared_dir = Some(shared.to_path_buf());
        config.artifacts.max_file_bytes = 100;
        Files::new(&config).unwrap()
    }

    #[test]
    fn only_plain_files_of_the_shared_folder_are_taken() {
        let root = std::env::temp_dir().join(format!("hangar-handoff-{}", uuid::Uuid::new_v4()));
        let shared = root.join("shared");
        let f = files(&shared);
        let shared = f.shared_dir().unwrap().to_path_buf();
        let area = crate::files::Area::of(Some("s1"), None).unwrap();
        let call = f.prepare_call(Some(area), &[], true).unwrap();
        let folder = call.artifacts_dir.clone().unwrap();
        let outside = root.join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        std::fs::write(shared.join("work.txt"), "made by the upstream").unwrap();
        std::fs::write(folder.join("own.txt"), "own").unwrap();
        std::os::unix::fs::symlink(&outside, shared.join("link.txt")).unwrap();
        std::fs::hard_link(&outside, shared.join("hard.txt")).unwrap();
        let other = f.uploads.dir.join("s2").join("id");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("theirs.txt"), "theirs").unwrap();

        assert_eq!(
            f.take_file(&folder, &folder.join("own.txt").to_string_lossy()),
            Ok("own.txt".into())
        );
        assert_eq!(f.take_file(&folder, "work.txt"), Ok("work.txt".into()));
        assert_eq!(
            std::fs::read_to_string(folder.join("work.txt")).unwrap(),
            "made by the upstream"
        );
        for bad in [
            outside.to_string_lossy().to_string(),
            "../secret.txt".into(),
            "link.txt".into(),
            "hard.txt".into(),
            other.join("theirs.txt").to_string_lossy().to_string(),
            "/etc/hostname".into(),
        ] {
            let refused = f.take_file(&folder, &bad);
            assert!(
                matches!(refused, Err(Untaken::Outside(_))),
                "{bad}: {refused:?}"
            );
        }
        assert_eq!(f.take_file(&folder, "nothing.txt"), Err(Untaken::Missing));
        std::fs::write(shared.join("big.bin"), [0u8; 101]).unwrap();
        assert_eq!(f.take_file(&folder, "big.bin"), Err(Untaken::TooLarge(100)));
        assert!(!folder.join("big.bin").exists());

        assert_eq!(
            f.keep_bytes(&folder, "../x", b"inline"),
            Ok("output".into())
        );
        assert!(f.keep_bytes(&folder, "output", b"again").is_err());
        std::os::unix::fs::symlink(&outside, folder.join("sneaky")).unwrap();
        f.clear_strays(&folder);
        assert!(!folder.join("sneaky").exists() && outside.exists());
        std::fs::remove_dir_all(root).unwrap();
    }
}

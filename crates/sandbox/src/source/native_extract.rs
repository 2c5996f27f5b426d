//! Extraction of the archive by the native verifier
//! ([`super::native_check`]): a tar read from a stream into a directory
//! that did not exist before, refusing every entry that could write outside
//! it or that the archive builder never writes.
//!
//! Entries are created below the destination by name, never following a
//! symlink: every parent directory on an entry's way was created by this
//! extraction (so it is a real directory), files and symlinks are created
//! exclusively (`O_EXCL`, no existing path is reused). Modes are those
//! `tar -x` gives a non-root user: the archive's permission bits less the
//! umask, except that the owner's bits are kept, so the exec bit the host
//! compares never depends on the sandbox's umask. Files get the archive's
//! modification time (a re-sync's time stamp is compared with it).
//!
//! Each regular file, once written, goes to the read-back thread
//! ([`super::native_read_back`]) with the descriptor it was created with; a
//! large one is read back by a [`Follower`] while it is written.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::native_read_back::{self, Extracted, Follower, FOLLOW};

/// Why an archive was refused or could not be extracted.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("the archive is malformed: {0}")]
    Malformed(io::Error),
    #[error("refusing archive entry {0:?}: an absolute name")]
    Absolute(String),
    #[error("refusing archive entry {0:?}: a name with '..'")]
    DotDot(String),
    #[error("refusing archive entry {0:?}: its parent is not a directory the archive created (a symlink or a file)")]
    ThroughNonDirectory(String),
    #[error("refusing archive entry {0:?}: the path exists already (a duplicate entry)")]
    Exists(String),
    #[error("refusing archive entry {name:?}: unsupported entry type {kind:?}")]
    Unsupported { name: String, kind: u8 },
    #[error("extracting {name:?}: {source}")]
    Io { name: String, source: io::Error },
    #[error("the read-back thread stopped")]
    ReadBackStopped,
}

/// Bytes per read of a file's content from the archive.
const BUF: usize = 256 * 1024;

/// Extract the tar read from `input` into `dest` (an empty directory),
/// handing every regular file to `read_back` once written (named
/// `./`-prefixed, as the walk names them).
pub fn extract(
    input: &mut dyn Read,
    dest: &Path,
    read_back: &native_read_back::Sender,
) -> Result<(), ExtractError> {
    let umask = current_umask();
    let mut x = Extraction {
        dest,
        umask,
        dirs: HashSet::new(),
        buf: vec![0u8; BUF],
        read_back,
    };
    let mut archive = tar::Archive::new(input);
    for entry in archive.entries().map_err(ExtractError::Malformed)? {
        let mut entry = entry.map_err(ExtractError::Malformed)?;
        x.entry(&mut entry)?;
    }
    Ok(())
}

struct Extraction<'a> {
    dest: &'a Path,
    umask: u32,
    /// Directories (relative names) this extraction created.
    dirs: HashSet<Vec<u8>>,
    buf: Vec<u8>,
    read_back: &'a native_read_back::Sender,
}

impl Extraction<'_> {
    fn entry(&mut self, entry: &mut tar::Entry<'_, &mut dyn Read>) -> Result<(), ExtractError> {
        // A pax global header (`git archive` writes one) only carries
        // metadata for the archive; `tar -x` ignores it too.
        if entry.header().entry_type() == tar::EntryType::XGlobalHeader {
            return Ok(());
        }
        let raw = entry.path_bytes().into_owned();
        let shown = || String::from_utf8_lossy(&raw).into_owned();
        let Some(rel) = relative_name(&raw).map_err(|e| e.named(shown()))? else {
            // The root itself (`.` or `./`): it exists.
            return Ok(());
        };
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().map_err(ExtractError::Malformed)? & 0o7777;
        self.parents(&rel, &shown)?;
        let path = self.dest.join(OsStr::from_bytes(&rel));
        let io = |source: io::Error| {
            if source.kind() == io::ErrorKind::AlreadyExists {
                ExtractError::Exists(shown())
            } else {
                ExtractError::Io {
                    name: shown(),
                    source,
                }
            }
        };
        match kind {
            tar::EntryType::Directory => {
                if self.dirs.contains(&rel) {
                    return Ok(());
                }
                std::fs::DirBuilder::new()
                    .mode(self.dir_mode(mode))
                    .create(&path)
                    .map_err(io)?;
                self.dirs.insert(rel);
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| {
                        ExtractError::Malformed(io::Error::other("a symlink without target"))
                    })?
                    .into_owned();
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), &path).map_err(io)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                self.file(entry, &rel, mode, &path, &io)?;
            }
            other => {
                return Err(ExtractError::Unsupported {
                    name: shown(),
                    kind: other.as_byte(),
                })
            }
        }
        Ok(())
    }

    /// Write a regular file's content (hand it to the read-back, or a
    /// follower that reads it back as it is written), mode and time.
    fn file(
        &mut self,
        entry: &mut tar::Entry<'_, &mut dyn Read>,
        rel: &[u8],
        mode: u32,
        path: &Path,
        io: &dyn Fn(io::Error) -> ExtractError,
    ) -> Result<(), ExtractError> {
        let mtime = entry.header().mtime().map_err(ExtractError::Malformed)?;
        // Readable too: the read-back reads it through this
        // descriptor, so it reads the very file created here.
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode & 0o777)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io)?;
        // A follower that cannot start or fails leaves the file to
        // the read-back thread.
        let follower = (entry.size() >= FOLLOW)
            .then(|| Follower::start(path).ok())
            .flatten();
        let mut written = 0;
        loop {
            let n = match entry.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ExtractError::Malformed(e)),
            };
            f.write_all(&self.buf[..n]).map_err(io)?;
            written += n as u64;
            if let Some(fw) = &follower {
                fw.written(written);
            }
        }
        let want = self.file_mode(mode);
        if want != mode & 0o777 & !self.umask {
            f.set_permissions(std::fs::Permissions::from_mode(want))
                .map_err(io)?;
        }
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime);
        f.set_modified(at).map_err(io)?;
        let mut name = b"./".to_vec();
        name.extend_from_slice(rel);
        let done = match follower.map(Follower::finish) {
            Some(Ok(read_back)) => Extracted::Followed { name, read_back },
            // A follower that failed leaves the file to the
            // read-back thread.
            _ => Extracted::File { name, file: f },
        };
        self.read_back
            .send(done)
            .map_err(|_| ExtractError::ReadBackStopped)?;
        Ok(())
    }

    /// Make sure every parent of `rel` is a directory this extraction
    /// created, creating missing ones (as `tar -x` does).
    fn parents(&mut self, rel: &[u8], shown: &dyn Fn() -> String) -> Result<(), ExtractError> {
        let mut end = 0;
        while let Some(i) = rel[end..].iter().position(|b| *b == b'/') {
            let parent = &rel[..end + i];
            end += i + 1;
            if self.dirs.contains(parent) {
                continue;
            }
            let path = self.dest.join(OsStr::from_bytes(parent));
            match std::fs::DirBuilder::new()
                .mode(self.dir_mode(0o755))
                .create(&path)
            {
                Ok(()) => {
                    self.dirs.insert(parent.to_vec());
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(ExtractError::ThroughNonDirectory(shown()))
                }
                Err(source) => {
                    return Err(ExtractError::Io {
                        name: shown(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    /// A directory's mode: the archive's less the umask, always
    /// accessible and writable to its owner (the extraction writes in it).
    fn dir_mode(&self, mode: u32) -> u32 {
        (mode & 0o777 & !self.umask) | 0o700
    }

    /// A file's mode: the archive's less the umask, the owner's bits kept.
    fn file_mode(&self, mode: u32) -> u32 {
        (mode & 0o777 & !self.umask) | (mode & 0o700)
    }
}

/// What is wrong with a name (before it is attached to the entry).
enum NameError {
    Absolute,
    DotDot,
}

impl NameError {
    fn named(self, name: String) -> ExtractError {
        match self {
            NameError::Absolute => ExtractError::Absolute(name),
            NameError::DotDot => ExtractError::DotDot(name),
        }
    }
}

/// An entry's name as a relative path without empty or `.` components;
/// `None` for the root itself.
fn relative_name(raw: &[u8]) -> Result<Option<Vec<u8>>, NameError> {
    if raw.first() == Some(&b'/') {
        return Err(NameError::Absolute);
    }
    let mut out = Vec::with_capacity(raw.len());
    for c in raw.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err(NameError::DotDot),
            c => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(c);
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// The process's umask (read by setting it and setting it back; no other
/// thread of the verifier creates files).
fn current_umask() -> u32 {
    // SAFETY: umask has no failure mode; it is restored at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalised_and_hostile_ones_refused() {
        assert_eq!(
            relative_name(b"./a//b/").ok().flatten(),
            Some(b"a/b".to_vec())
        );
        assert_eq!(relative_name(b"./").ok().flatten(), None);
        assert!(matches!(
            relative_name(b"/etc/passwd"),
            Err(NameError::Absolute)
        ));
        assert!(matches!(
            relative_name(b"a/../../x"),
            Err(NameError::DotDot)
        ));
        assert!(matches!(relative_name(b".."), Err(NameError::DotDot)));
    }
}

//! Uploading one local file through the archive endpoint as a streamed,
//! single-entry tar: header, the file's bytes read from disk chunk by chunk,
//! padding and the end-of-archive blocks. The file is never held in memory.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bollard::query_parameters::UploadToContainerOptionsBuilder;
use bytes::Bytes;
use futures_util::Stream;
use tokio::fs::File;
use tokio::io::AsyncReadExt;

use super::client::{self, Client};
use super::exec::{self, ExecSpec};
use crate::provider::{ProviderError, ProviderResult};

/// Size of the chunks read from disk.
const CHUNK: usize = 256 * 1024;
/// Tar block size.
const BLOCK: u64 = 512;

/// Split an absolute remote file path into (directory, file name).
fn split_remote(remote: &str) -> ProviderResult<(&str, &str)> {
    let bad = |why: &str| ProviderError::other(format!("cannot upload to `{remote}`: {why}"));
    if !remote.starts_with('/') {
        return Err(bad("not an absolute path"));
    }
    let (dir, name) = remote.rsplit_once('/').ok_or_else(|| bad("no file name"))?;
    if name.is_empty() || name == "." || name == ".." {
        return Err(bad("no file name"));
    }
    if remote.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    Ok((if dir.is_empty() { "/" } else { dir }, name))
}

/// The tar header block(s) for a regular file `name` of `size` bytes (a GNU
/// long-name entry comes first when the name needs one).
fn header_bytes(
    name: &str,
    size: u64,
    mode: u32,
    mtime: u64,
    owner: Owner,
) -> std::io::Result<Vec<u8>> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode & 0o7777);
    header.set_mtime(mtime);
    header.set_uid(owner.uid);
    header.set_gid(owner.gid);
    let mut builder = tar::Builder::new(Vec::new());
    // Appending an empty reader writes the header blocks only.
    builder.append_data(&mut header, name, std::io::empty())?;
    Ok(builder.get_ref().clone())
}

/// The blocks after the file's bytes: padding to a block, then two zero
/// blocks ending the archive.
fn trailer_bytes(size: u64) -> Vec<u8> {
    let pad = (BLOCK - size % BLOCK) % BLOCK;
    vec![0; (pad + 2 * BLOCK) as usize]
}

/// Where the tar stream is.
enum Phase {
    Header {
        header: Vec<u8>,
        file: File,
    },
    Body {
        file: File,
        remaining: u64,
    },
    /// The trailer was sent.
    Done,
}

/// The archive as a stream of chunks. A file that shrinks or grows while it
/// is read fails the stream (the message is kept in `failure`, since the
/// HTTP client only reports a broken body).
fn tar_stream(
    header: Vec<u8>,
    file: File,
    size: u64,
    failure: Arc<Mutex<Option<String>>>,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    let fail = move |msg: &str| {
        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg.to_string());
        std::io::Error::other(msg.to_string())
    };
    futures_util::stream::try_unfold(Phase::Header { header, file }, move |phase| {
        let fail = fail.clone();
        async move {
            let (chunk, next) = match phase {
                Phase::Header { header, file } => (
                    header,
                    Phase::Body {
                        file,
                        remaining: size,
                    },
                ),
                Phase::Body {
                    mut file,
                    remaining: 0,
                } => {
                    let mut probe = [0u8; 1];
                    if file.read(&mut probe).await? != 0 {
                        return Err(fail("the local file grew while it was uploaded"));
                    }
                    (trailer_bytes(size), Phase::Done)
                }
                Phase::Body {
                    mut file,
                    remaining,
                } => {
                    let mut buf = vec![0u8; remaining.min(CHUNK as u64) as usize];
                    let n = file.read(&mut buf).await?;
                    if n == 0 {
                        return Err(fail("the local file shrank while it was uploaded"));
                    }
                    buf.truncate(n);
                    let next = Phase::Body {
                        file,
                        remaining: remaining - n as u64,
                    };
                    (buf, next)
                }
                Phase::Done => return Ok(None),
            };
            Ok(Some((Bytes::from(chunk), next)))
        }
    })
}

/// Numeric owner of uploaded files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Owner {
    pub uid: u64,
    pub gid: u64,
}

/// The owner of uploaded files per sandbox: the user commands run as,
/// resolved once inside the sandbox with `id` (the daemon's own `copyUIDGID`
/// resolves names on the host on some versions, so it is not used).
#[derive(Default)]
pub(super) struct Owners(Mutex<HashMap<String, Owner>>);

impl Owners {
    /// The owner for sandbox `id` whose commands run as `user`.
    pub(super) async fn resolve(
        &self,
        client: &Client,
        id: &str,
        user: Option<&str>,
    ) -> ProviderResult<Owner> {
        if let Some(owner) = self.lock().get(id) {
            return Ok(*owner);
        }
        let spec = ExecSpec {
            argv: vec!["/bin/sh".into(), "-c".into(), "id -u && id -g".into()],
            cwd: "/",
            env: &[],
            user,
            tty: false,
            stdin: false,
        };
        let (code, out) = exec::run_collect(client, id, spec).await?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut ids = text.lines().map(|l| l.trim().parse::<u64>());
        let owner = match (code, ids.next(), ids.next()) {
            (Some(0), Some(Ok(uid)), Some(Ok(gid))) => Owner { uid, gid },
            _ => {
                return Err(ProviderError::other(format!(
                    "cannot find the uid/gid of the sandbox user in sandbox {id} \
                     (`id` exit {code:?}): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )))
            }
        };
        self.lock().insert(id.to_string(), owner);
        Ok(owner)
    }

    /// Forget a sandbox (after it was destroyed).
    pub(super) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owner>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Upload `local` to `remote` (whose directory must exist) in container `id`.
/// The file gets the local permission bits and belongs to `owner`.
pub(super) async fn upload(
    client: &Client,
    id: &str,
    local: &Path,
    remote: &str,
    owner: Owner,
) -> ProviderResult<()> {
    let (dir, name) = split_remote(remote)?;
    let local_err = |e: std::io::Error| {
        ProviderError::other(format!("cannot read local file {}: {e}", local.display()))
    };
    let file = File::open(local).await.map_err(local_err)?;
    let meta = file.metadata().await.map_err(local_err)?;
    if !meta.is_file() {
        return Err(ProviderError::other(format!(
            "cannot upload {}: not a regular file",
            local.display()
        )));
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let header = header_bytes(name, meta.len(), mode, mtime, owner).map_err(local_err)?;
    let failure = Arc::new(Mutex::new(None));
    let body = tar_stream(header, file, meta.len(), failure.clone());
    let opts = UploadToContainerOptionsBuilder::default().path(dir).build();
    let api = client.upload_api().await?;
    let result = api
        .upload_to_container(id, Some(opts), bollard::body_try_stream(body))
        .await;
    if let Some(msg) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(ProviderError::other(format!(
            "upload of {} to {remote} in sandbox {id} failed: {msg}",
            local.display()
        )));
    }
    result.map_err(|e| {
        let message = client::server_message(&e).unwrap_or_default().to_string();
        match client::status(&e) {
            Some(404) if message.contains("No such container") => {
                ProviderError::NotFound { id: id.to_string() }
            }
            Some(404) => ProviderError::other(format!(
                "cannot upload to {remote}: directory {dir} does not exist in sandbox {id}"
            )),
            Some(400) if message.contains("not a directory") => ProviderError::other(format!(
                "cannot upload to {remote}: {dir} is not a directory in sandbox {id}"
            )),
            Some(_) => ProviderError::other(format!(
                "cannot upload {} to {remote} in sandbox {id}: {message}",
                local.display()
            )),
            None => client.error(e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::TryStreamExt;
    use std::io::Write;

    const OWNER: Owner = Owner {
        uid: 1000,
        gid: 1001,
    };

    #[test]
    fn remote_paths_split() {
        assert_eq!(split_remote("/a/b/c.txt").unwrap(), ("/a/b", "c.txt"));
        assert_eq!(split_remote("/c.txt").unwrap(), ("/", "c.txt"));
        assert!(split_remote("rel/c.txt").is_err());
        assert!(split_remote("/a/b/").is_err());
        assert!(split_remote("/a/..").is_err());
    }

    /// The streamed archive is a valid tar with exactly the file's bytes.
    async fn roundtrip(name: &str, len: usize) {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        tmp.write_all(&data).unwrap();
        let file = File::open(tmp.path()).await.unwrap();
        let header = header_bytes(name, len as u64, 0o754, 1_700_000_000, OWNER).unwrap();
        let failure = Arc::new(Mutex::new(None));
        let chunks: Vec<Bytes> = tar_stream(header, file, len as u64, failure)
            .try_collect()
            .await
            .unwrap();
        let archive: Vec<u8> = chunks.concat();
        assert_eq!(archive.len() % 512, 0);
        let mut ar = tar::Archive::new(&archive[..]);
        let mut entries = ar.entries().unwrap();
        let mut entry = entries.next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str().unwrap(), name);
        assert_eq!(entry.header().mode().unwrap(), 0o754);
        assert_eq!(entry.header().uid().unwrap(), 1000);
        assert_eq!(entry.header().gid().unwrap(), 1001);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut got).unwrap();
        assert_eq!(got, data);
        drop(entry);
        assert!(entries.next().is_none());
    }

    #[tokio::test]
    async fn streams_a_valid_single_entry_tar() {
        roundtrip("f.bin", 0).await;
        roundtrip("f.bin", 512).await;
        roundtrip("f.bin", CHUNK * 2 + 13).await;
        roundtrip(&"n".repeat(150), 1000).await;
    }

    #[tokio::test]
    async fn a_file_that_grew_fails_the_stream() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(b"0123456789").unwrap();
        let file = File::open(tmp.path()).await.unwrap();
        let header = header_bytes("f", 5, 0o644, 0, OWNER).unwrap();
        let failure = Arc::new(Mutex::new(None));
        let r: std::io::Result<Vec<Bytes>> = tar_stream(header, file, 5, failure.clone())
            .try_collect()
            .await;
        assert!(r.is_err());
        assert!(failure.lock().unwrap().as_deref().unwrap().contains("grew"));
    }
}

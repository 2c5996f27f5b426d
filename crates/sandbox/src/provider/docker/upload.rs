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
    let bad = |why: &str| ProviderError::Invalid(format!("cannot upload to `{remote}`: {why}"));
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
    entry_header(tar::EntryType::Regular, name, size, mode, mtime, owner)
}

/// The header block(s) of an entry without content (or of `size` bytes).
fn entry_header(
    kind: tar::EntryType,
    name: &str,
    size: u64,
    mode: u32,
    mtime: u64,
    owner: Owner,
) -> std::io::Result<Vec<u8>> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
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

/// Padding after `size` bytes of content, to a whole block.
fn padding(size: u64) -> Vec<u8> {
    vec![0; ((BLOCK - size % BLOCK) % BLOCK) as usize]
}

/// The two zero blocks ending an archive.
fn end_blocks() -> Vec<u8> {
    vec![0; (2 * BLOCK) as usize]
}

/// One entry of an uploaded archive: its header block(s) and, for a file,
/// the open file and the size its header announced.
struct Item {
    header: Vec<u8>,
    body: Option<(File, u64)>,
}

/// Where the tar stream is.
enum Phase {
    /// Between entries (the next header, or the end blocks, is due).
    Next {
        items: std::collections::VecDeque<Item>,
    },
    Body {
        items: std::collections::VecDeque<Item>,
        file: File,
        size: u64,
        remaining: u64,
    },
    /// The end blocks were sent.
    Done,
}

/// The archive of `items` as a stream of chunks. A file that shrinks or
/// grows while it is read fails the stream (the message is kept in
/// `failure`, since the HTTP client only reports a broken body).
fn tar_stream(
    items: Vec<Item>,
    failure: Arc<Mutex<Option<String>>>,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    let fail = move |msg: &str| {
        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg.to_string());
        std::io::Error::other(msg.to_string())
    };
    let items = items.into_iter().collect();
    futures_util::stream::try_unfold(Phase::Next { items }, move |phase| {
        let fail = fail.clone();
        async move {
            let (chunk, next) = match phase {
                Phase::Next { mut items } => match items.pop_front() {
                    None => (end_blocks(), Phase::Done),
                    Some(Item { header, body: None }) => (header, Phase::Next { items }),
                    Some(Item {
                        header,
                        body: Some((file, size)),
                    }) => (
                        header,
                        Phase::Body {
                            items,
                            file,
                            size,
                            remaining: size,
                        },
                    ),
                },
                Phase::Body {
                    items,
                    mut file,
                    size,
                    remaining: 0,
                } => {
                    let mut probe = [0u8; 1];
                    if file.read(&mut probe).await? != 0 {
                        return Err(fail("the local file grew while it was uploaded"));
                    }
                    (padding(size), Phase::Next { items })
                }
                Phase::Body {
                    items,
                    mut file,
                    size,
                    remaining,
                } => {
                    let mut buf = vec![0u8; remaining.min(CHUNK as u64) as usize];
                    let n = file.read(&mut buf).await?;
                    if n == 0 {
                        return Err(fail("the local file shrank while it was uploaded"));
                    }
                    buf.truncate(n);
                    let next = Phase::Body {
                        items,
                        file,
                        size,
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
        let (code, out) =
            exec::run_collect(client, id, spec, exec::Helper::small("`id -u && id -g`")).await?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut ids = text.lines().map(|l| l.trim().parse::<u64>());
        let owner = match (code, ids.next(), ids.next()) {
            (Some(0), Some(Ok(uid)), Some(Ok(gid))) => Owner { uid, gid },
            _ => {
                return Err(ProviderError::Transfer(format!(
                    "cannot find the uid/gid of the sandbox user in sandbox {id} \
                     (`id`: {}): {}",
                    crate::exit_code::ExitText(code),
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

/// A local file opened for upload as entry `name`: its header (local
/// permission bits, modification time, `owner`) and its bytes.
async fn file_item(local: &Path, name: &str, owner: Owner) -> ProviderResult<Item> {
    let local_err = |e: std::io::Error| {
        ProviderError::Io(format!("cannot read local file {}: {e}", local.display()))
    };
    let file = File::open(local).await.map_err(local_err)?;
    let meta = file.metadata().await.map_err(local_err)?;
    if !meta.is_file() {
        return Err(ProviderError::Io(format!(
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
    Ok(Item {
        header,
        body: Some((file, meta.len())),
    })
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
    let item = file_item(local, name, owner).await?;
    send(
        client,
        id,
        dir,
        vec![item],
        remote,
        &local.display().to_string(),
    )
    .await
}

/// Upload the local `files` (name in the directory, local path) as the new
/// directory `parent/name` (mode 0700) in container `id`, everything
/// belonging to `owner`; `parent` must exist.
pub(super) async fn upload_dir(
    client: &Client,
    id: &str,
    parent: &str,
    name: &str,
    files: &[(String, std::path::PathBuf)],
    owner: Owner,
) -> ProviderResult<()> {
    let remote = format!("{}/{name}", parent.trim_end_matches('/'));
    split_remote(&remote)?;
    let bad = |what: &str| ProviderError::Invalid(format!("cannot upload {what} to {remote}"));
    if name.contains('/') || files.iter().any(|(f, _)| f.contains('/') || f.is_empty()) {
        return Err(bad("a name with a `/`"));
    }
    let dir_header = entry_header(tar::EntryType::Directory, name, 0, 0o700, 0, owner)
        .map_err(|e| bad(&e.to_string()))?;
    let mut items = vec![Item {
        header: dir_header,
        body: None,
    }];
    for (file, local) in files {
        items.push(file_item(local, &format!("{name}/{file}"), owner).await?);
    }
    let what = format!("{} files", files.len());
    send(client, id, parent, items, &remote, &what).await
}

/// Stream `items` as one archive extracted into `dir` of container `id`
/// (`remote` and `what` name the upload in errors).
async fn send(
    client: &Client,
    id: &str,
    dir: &str,
    items: Vec<Item>,
    remote: &str,
    what: &str,
) -> ProviderResult<()> {
    let failure = Arc::new(Mutex::new(None));
    let body = tar_stream(items, failure.clone());
    let opts = UploadToContainerOptionsBuilder::default().path(dir).build();
    let api = client.upload_api().await?;
    let result = api
        .upload_to_container(id, Some(opts), bollard::body_try_stream(body))
        .await;
    if let Some(msg) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(ProviderError::Transfer(format!(
            "upload of {what} to {remote} in sandbox {id} failed: {msg}"
        )));
    }
    result.map_err(|e| {
        let message = client::server_message(&e).unwrap_or_default().to_string();
        match client::status(&e) {
            Some(404) if message.contains("No such container") => {
                ProviderError::NotFound { id: id.to_string() }
            }
            Some(404) => ProviderError::Transfer(format!(
                "cannot upload to {remote}: directory {dir} does not exist in sandbox {id}"
            )),
            Some(400) if message.contains("not a directory") => ProviderError::Transfer(format!(
                "cannot upload to {remote}: {dir} is not a directory in sandbox {id}"
            )),
            Some(_) => ProviderError::Transfer(format!(
                "cannot upload {what} to {remote} in sandbox {id}: {message}"
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
        let item = Item {
            header,
            body: Some((file, len as u64)),
        };
        let chunks: Vec<Bytes> = tar_stream(vec![item], failure).try_collect().await.unwrap();
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

    /// A directory entry and the files after it, each padded to a block,
    /// make one archive whose entries come back in order with their bytes.
    #[tokio::test]
    async fn a_directory_and_its_files_stream_as_one_archive() {
        let mut locals = vec![];
        let mut items = vec![Item {
            header: entry_header(tar::EntryType::Directory, "d", 0, 0o700, 0, OWNER).unwrap(),
            body: None,
        }];
        for (name, len) in [("a", 1usize), ("b", 513), ("c", 0)] {
            let mut tmp = tempfile::NamedTempFile::new().unwrap();
            tmp.write_all(&vec![name.as_bytes()[0]; len]).unwrap();
            items.push(
                file_item(tmp.path(), &format!("d/{name}"), OWNER)
                    .await
                    .unwrap(),
            );
            locals.push(tmp);
        }
        let failure = Arc::new(Mutex::new(None));
        let archive: Vec<u8> = tar_stream(items, failure)
            .try_collect::<Vec<Bytes>>()
            .await
            .unwrap()
            .concat();
        let mut ar = tar::Archive::new(&archive[..]);
        let got: Vec<(String, tar::EntryType, Vec<u8>)> = ar
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let mut data = vec![];
                std::io::Read::read_to_end(&mut e, &mut data).unwrap();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                (path, e.header().entry_type(), data)
            })
            .collect();
        let want = vec![
            ("d".to_string(), tar::EntryType::Directory, vec![]),
            ("d/a".into(), tar::EntryType::Regular, b"a".to_vec()),
            ("d/b".into(), tar::EntryType::Regular, vec![b'b'; 513]),
            ("d/c".into(), tar::EntryType::Regular, vec![]),
        ];
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_file_that_grew_fails_the_stream() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(b"0123456789").unwrap();
        let file = File::open(tmp.path()).await.unwrap();
        let header = header_bytes("f", 5, 0o644, 0, OWNER).unwrap();
        let failure = Arc::new(Mutex::new(None));
        let item = Item {
            header,
            body: Some((file, 5)),
        };
        let r: std::io::Result<Vec<Bytes>> =
            tar_stream(vec![item], failure.clone()).try_collect().await;
        assert!(r.is_err());
        assert!(failure.lock().unwrap().as_deref().unwrap().contains("grew"));
    }
}

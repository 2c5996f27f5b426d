//! The native verifier: rfs's own executable, run *inside* the sandbox as
//! `rfs __verify-source ARCHIVE DEST AUX [DECOMPRESSOR [STAMP]]` by
//! providers that can execute it ([`crate::provider::StreamInput::native`]).
//! Same arguments, exit codes and report as [`super::remote_check::SCRIPT`],
//! which remote providers keep running; the host parses either report with
//! [`super::remote_check::parse_report`] and compares it with the same code.
//!
//! What it guarantees is what the script guarantees, with each byte of
//! content hashed once in the sandbox. The archive digest is the
//! `tar-entries-sha256` of [`super::archive_digest`], not the plain sha256
//! the script computes: every header, padding and end block of the
//! (uncompressed) stream as received, to its last byte, and each regular
//! file's content sha256 as read back from the filesystem right after the
//! file was written ([`super::native_read_back`], on a thread of its own,
//! through the descriptor the file was created with). The extraction writes
//! exactly the bytes it received, so the digest equals the host's only if
//! the stream arrived intact and the filesystem returns it. The file set,
//! exec bits, symlink targets and every file's sha256 are then read from
//! the filesystem by the walk ([`super::native_walk`]), which takes a
//! file's read-back hash only for the very file it was read from, unchanged
//! since, and reads any other file again. A large file is read back
//! (through its own descriptor, each byte once it was written) while it is
//! being written, so its read-back overlaps its extraction.
//!
//! Extraction ([`super::native_extract`]) refuses what the builder never
//! writes and a hostile archive would: absolute names, `..`, entries through
//! a symlink or a file, duplicate entries, and entry types other than
//! directories, regular files and symlinks (exit [`EXIT_EXTRACT`]).

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::native_extract::{self, ExtractError};
use super::native_read_back::{self, ReadBackError};
use super::native_walk;
use super::remote_check::{
    EXIT_DECOMPRESS, EXIT_DEST_EXISTS, EXIT_DIGEST, EXIT_EXTRACT, EXIT_MISSING_TOOL, EXIT_MKDIR,
    STDIN,
};

pub use crate::provider::own_executable::{probe_answer, COMMAND, PROBE};

/// Exit code of a verifier that was called wrongly or could not read a file
/// back (the script has no such case).
pub const EXIT_OTHER: i32 = 1;

/// Bytes per chunk handed from the stream to the read-back thread.
const CHUNK: usize = 256 * 1024;

/// Why the verification stopped.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("usage: rfs {COMMAND} ARCHIVE DEST AUX [DECOMPRESSOR [STAMP]]")]
    Usage,
    #[error("required tool '{0}' is missing in the sandbox (the transfer is compressed)")]
    Decompressor(String),
    #[error("destination {0} already exists in the sandbox")]
    DestExists(String),
    #[error("cannot create {path}: {source}")]
    Mkdir { path: String, source: io::Error },
    #[error(transparent)]
    Extract(#[from] ExtractError),
    #[error("reading the archive: {0}")]
    Read(io::Error),
    #[error("decompressing the transfer: {0}")]
    Decompress(io::Error),
    #[error("the archive's read-back thread stopped")]
    Hasher,
    #[error(transparent)]
    ReadBack(#[from] ReadBackError),
    #[error("writing the report: {0}")]
    Report(io::Error),
}

impl VerifyError {
    /// The script's exit code for the same failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            VerifyError::ReadBack(ReadBackError::Unmatched) => EXIT_DIGEST,
            VerifyError::Usage | VerifyError::ReadBack(_) | VerifyError::Report(_) => EXIT_OTHER,
            VerifyError::Decompressor(_) => EXIT_MISSING_TOOL,
            VerifyError::DestExists(_) => EXIT_DEST_EXISTS,
            VerifyError::Mkdir { .. } => EXIT_MKDIR,
            VerifyError::Extract(_) => EXIT_EXTRACT,
            VerifyError::Read(_) | VerifyError::Hasher => EXIT_DIGEST,
            VerifyError::Decompress(_) => EXIT_DECOMPRESS,
        }
    }
}

/// The verifier's arguments (after [`COMMAND`]).
#[derive(Debug)]
struct Args {
    archive: OsString,
    dest: PathBuf,
    aux: PathBuf,
    gzip: bool,
    stamp: Option<PathBuf>,
}

impl Args {
    fn parse(args: Vec<OsString>) -> Result<Args, VerifyError> {
        let mut it = args.into_iter();
        let (Some(archive), Some(dest), Some(aux)) = (it.next(), it.next(), it.next()) else {
            return Err(VerifyError::Usage);
        };
        let gzip = match it.next() {
            None => false,
            Some(z) if z.is_empty() => false,
            Some(z) if z == "gzip" => true,
            Some(z) => return Err(VerifyError::Decompressor(z.to_string_lossy().into_owned())),
        };
        let stamp = it.next().filter(|s| !s.is_empty()).map(PathBuf::from);
        if it.next().is_some() {
            return Err(VerifyError::Usage);
        }
        Ok(Args {
            archive,
            dest: dest.into(),
            aux: aux.into(),
            gzip,
            stamp,
        })
    }
}

/// Run the verifier with the arguments after [`COMMAND`]; the report goes
/// to stdout, a failure's reason to stderr. Returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    if args.len() == 1 && args[0] == PROBE {
        // A provider that copied the executable into a sandbox checks
        // that it starts there (loader, libraries, architecture).
        print!("{}", probe_answer());
        return 0;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let done = verify(args, &mut out).and_then(|()| out.flush().map_err(VerifyError::Report));
    match done {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}

/// Extract, verify and write the report into `out` (only once everything
/// was checked and read back).
pub fn verify(args: Vec<OsString>, out: &mut dyn Write) -> Result<(), VerifyError> {
    let args = Args::parse(args)?;
    if args.dest.symlink_metadata().is_ok() {
        return Err(VerifyError::DestExists(
            args.dest.to_string_lossy().into_owned(),
        ));
    }
    let mkdir = |p: &Path, all: bool| {
        let r = if all {
            std::fs::create_dir_all(p)
        } else {
            std::fs::create_dir(p)
        };
        r.map_err(|source| VerifyError::Mkdir {
            path: p.to_string_lossy().into_owned(),
            source,
        })
    };
    mkdir(&args.dest, true)?;
    // A scratch directory like the script's (it must not exist; it holds
    // nothing here and is removed at the end).
    mkdir(&args.aux, false)?;
    let input: Box<dyn Read + Send> = if args.archive == STDIN {
        crate::provider::input::enlarge_pipe(0);
        Box::new(io::stdin())
    } else {
        Box::new(std::fs::File::open(&args.archive).map_err(VerifyError::Read)?)
    };
    let input: Box<dyn Read + Send> = if args.gzip {
        Box::new(flate2::read::MultiGzDecoder::new(input))
    } else {
        input
    };
    let (archive_digest, read_back) = extract_verifying(input, args.gzip, &args.dest)?;
    let root = std::fs::canonicalize(&args.dest).map_err(|source| VerifyError::Mkdir {
        path: args.dest.to_string_lossy().into_owned(),
        source,
    })?;
    let tree = native_walk::walk(&root, &read_back)?;
    native_walk::write_report(out, &root, &archive_digest, &tree).map_err(VerifyError::Report)?;
    if let Some(stamp) = &args.stamp {
        touch_stamp(stamp);
    }
    let _ = std::fs::remove_dir_all(&args.aux);
    if args.archive != STDIN {
        let _ = std::fs::remove_file(&args.archive);
    }
    Ok(())
}

/// Extract the tar read from `input` into `dest` while a thread reads
/// every file back and computes the archive digest from the stream and
/// those read-backs ([`native_read_back`]); the rest of the stream after
/// the archive's end goes into the digest too. Returns the hex digest and
/// the read-backs.
fn extract_verifying(
    input: Box<dyn Read + Send>,
    gzip: bool,
    dest: &Path,
) -> Result<native_read_back::Outcome, VerifyError> {
    let (tx, reader) = native_read_back::start().map_err(VerifyError::Read)?;
    let mut tee = StreamTee::new(input, tx.clone());
    let extracted = native_extract::extract(&mut tee, dest, &tx);
    drop(tx);
    // The stream's failure explains the extraction's.
    let read_error = |tee: &mut StreamTee| {
        tee.failed.take().map(|e| {
            if gzip {
                VerifyError::Decompress(e)
            } else {
                VerifyError::Read(e)
            }
        })
    };
    // Like the script's `cat >/dev/null`: what follows the archive's end
    // is part of the stream and of its digest.
    let drained = extracted.is_ok() && tee.drain().is_ok();
    let stream_error = read_error(&mut tee);
    drop(tee);
    let read_back = reader.join().map_err(|_| VerifyError::Hasher)?;
    if let Some(e) = stream_error {
        return Err(e);
    }
    match (extracted, read_back) {
        (Err(ExtractError::ReadBackStopped), Err(e)) => Err(e.into()),
        (Err(e), _) => Err(e.into()),
        (Ok(()), Err(e)) => Err(e.into()),
        (Ok(()), Ok(_)) if !drained => Err(VerifyError::Hasher),
        (Ok(()), Ok(outcome)) => Ok(outcome),
    }
}

/// A reader over `inner` that hands every chunk it reads to the read-back
/// thread (shared, not copied) before serving it.
struct StreamTee {
    inner: Box<dyn Read + Send>,
    tx: native_read_back::Sender,
    cur: Arc<Vec<u8>>,
    pos: usize,
    /// Chunks recently sent; reused once the thread dropped its share.
    pool: Vec<Arc<Vec<u8>>>,
    failed: Option<io::Error>,
}

impl StreamTee {
    fn new(inner: Box<dyn Read + Send>, tx: native_read_back::Sender) -> Self {
        StreamTee {
            inner,
            tx,
            cur: Arc::new(Vec::new()),
            pos: 0,
            pool: Vec::new(),
            failed: None,
        }
    }

    /// Read the next chunk (empty at the end of the stream).
    fn refill(&mut self) -> io::Result<()> {
        let spent = std::mem::take(&mut self.cur);
        if spent.capacity() > 0 {
            self.pool.push(spent);
        }
        let mut buf = match self.pool.iter().position(|a| Arc::strong_count(a) == 1) {
            Some(i) => self.pool.swap_remove(i),
            None => Arc::new(Vec::with_capacity(CHUNK)),
        };
        self.pool.truncate(native_read_back::IN_FLIGHT + 2);
        let v = Arc::get_mut(&mut buf).expect("an unshared chunk");
        // A reused chunk is full-length already (no zeroing); what is not
        // read over is cut off below.
        v.resize(CHUNK, 0);
        let mut n = 0;
        while n < CHUNK {
            match self.inner.read(&mut v[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let msg = e.to_string();
                    self.failed = Some(e);
                    return Err(io::Error::other(msg));
                }
            }
        }
        v.truncate(n);
        if n > 0
            && self
                .tx
                .send(native_read_back::Extracted::Chunk(buf.clone()))
                .is_err()
        {
            return Err(io::Error::other("the read-back thread stopped"));
        }
        self.cur = buf;
        self.pos = 0;
        Ok(())
    }
}

impl StreamTee {
    /// Read the rest of the stream (into the digest).
    fn drain(&mut self) -> io::Result<()> {
        loop {
            self.refill()?;
            if self.cur.is_empty() {
                return Ok(());
            }
        }
    }
}

impl Read for StreamTee {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.cur.len() {
            self.refill()?;
        }
        let k = out.len().min(self.cur.len() - self.pos);
        out[..k].copy_from_slice(&self.cur[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

/// Like the script: STAMP gets a modification time one second before now
/// (whole seconds), or is removed when that fails.
fn touch_stamp(stamp: &Path) {
    let when = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(1))
        .unwrap_or(0);
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(when);
    let done = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(stamp)
        .and_then(|f| f.set_modified(at));
    if done.is_err() {
        let _ = std::fs::remove_file(stamp);
    }
}

pub use crate::provider::own_executable::{declare_executable, executable};

/// Whether `arg` (rfs's first argument) asks for the verifier.
pub fn is_command(arg: &OsStr) -> bool {
    arg.as_bytes() == COMMAND.as_bytes()
}

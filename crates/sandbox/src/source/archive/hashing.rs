//! Writers and readers that count and hash what passes through them: the
//! archive's digest as it is written, each file's as it is read.

use std::io::{self, Read, Write};

use sha2::{Digest, Sha256};

use super::super::archive_digest::EntriesDigest;

/// The archive digest computed while the archive is written.
pub(super) enum ArchiveHash {
    Sha256(Sha256),
    Entries(EntriesDigest),
}

/// A writer that counts and optionally hashes what passes through.
pub(super) struct MaybeHashing<W> {
    pub(super) inner: W,
    pub(super) hash: Option<ArchiveHash>,
    pub(super) n: u64,
}

impl<W> MaybeHashing<W> {
    /// The next regular file's content hash is given by
    /// [`MaybeHashing::content_digest`] (entries digest only).
    pub(super) fn expect_content_digest(&mut self) {
        if let Some(ArchiveHash::Entries(d)) = self.hash.as_mut() {
            d.expect_content_digest();
        }
    }

    /// The hex SHA-256 of the regular file just written.
    pub(super) fn content_digest(&mut self, sha256_hex: &str) -> io::Result<()> {
        let Some(ArchiveHash::Entries(d)) = self.hash.as_mut() else {
            return Ok(());
        };
        let mut raw = [0u8; 32];
        hex::decode_to_slice(sha256_hex, &mut raw).map_err(io::Error::other)?;
        d.content_digest(&raw).map_err(io::Error::other)
    }
}

impl<W: Write> Write for MaybeHashing<W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        match self.hash.as_mut() {
            Some(ArchiveHash::Sha256(h)) => h.update(&b[..n]),
            Some(ArchiveHash::Entries(d)) => d.update(&b[..n]).map_err(io::Error::other)?,
            None => {}
        }
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A writer that hashes and counts what passes through.
pub struct HashingWriter<W> {
    inner: W,
    hash: Sha256,
    n: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hash: Sha256::new(),
            n: 0,
        }
    }
    /// The inner writer, the hex sha256 and the byte count.
    pub fn finish(self) -> (W, String, u64) {
        (self.inner, hex::encode(self.hash.finalize()), self.n)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        self.hash.update(&b[..n]);
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes and counts what passes through, reading in large
/// chunks so hashing stays on the fast path.
pub(super) struct HashingReader<R> {
    inner: R,
    hash: Sha256,
    /// The git object id of a blob (SHA-1 over header + content).
    object: sha1::Sha1,
    n: u64,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
}

impl<R: Read> HashingReader<R> {
    /// Over the content of a blob of `size` bytes.
    pub(super) fn new(inner: R, buf: Vec<u8>, size: u64) -> Self {
        let mut object = sha1::Sha1::new();
        sha1::Digest::update(&mut object, format!("blob {size}\0").as_bytes());
        HashingReader {
            inner,
            hash: Sha256::new(),
            object,
            n: 0,
            buf,
            pos: 0,
            len: 0,
        }
    }

    /// The buffer, the hex SHA-256, the byte count, the hex object id.
    pub(super) fn finish(self) -> (Vec<u8>, String, u64, String) {
        let object = hex::encode(sha1::Digest::finalize(self.object));
        (self.buf, hex::encode(self.hash.finalize()), self.n, object)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.len {
            let n = self.inner.read(&mut self.buf)?;
            if n == 0 {
                return Ok(0);
            }
            self.hash.update(&self.buf[..n]);
            sha1::Digest::update(&mut self.object, &self.buf[..n]);
            self.n += n as u64;
            self.pos = 0;
            self.len = n;
        }
        let k = out.len().min(self.len - self.pos);
        out[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

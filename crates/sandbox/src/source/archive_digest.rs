//! The archive digest the host and rfs's native verifier compare
//! (`tar-entries-sha256`): SHA-256 over the tar stream exactly as sent or
//! received, to its last byte, except that each entry's content is replaced
//! by the SHA-256 of that content. Header blocks, padding and the end
//! blocks (and anything after them) go in verbatim, so a change of any
//! byte of the stream changes the digest, as with a plain SHA-256.
//!
//! What it buys: the host already hashes every file's content for the
//! manifest, so it gets the archive digest without hashing the content a
//! second time ([`EntriesDigest::expect_content_digest`]); the verifier
//! computes the same digest from the stream it receives, hashing each byte
//! once, on its own thread. The POSIX script cannot parse a tar stream, so
//! where it verifies the digest stays the plain SHA-256 of the stream
//! ([`DigestKind`]).
//!
//! Per entry, in stream order: the 512-byte header block, then the 32-byte
//! SHA-256 of its `size` content bytes, then its padding to a block. The
//! first all-zero header block and every byte after it are hashed as they
//! are. A header whose size cannot be read ends the parsing the same way
//! (the rest is hashed raw: the digest is still defined, and the extractor
//! refuses such an archive anyway).

use sha2::{Digest, Sha256};

/// Tar block size.
const BLOCK: usize = 512;

pub use crate::events::DigestKind;

/// Where the parser is in the stream.
#[derive(Debug)]
enum State {
    /// Collecting a header block (`fill` bytes of it so far).
    Header { fill: usize },
    /// In an entry's content; `supplied`: its digest comes from the caller.
    Content {
        remaining: u64,
        pad: usize,
        supplied: bool,
    },
    /// In the padding after a content whose digest went in already.
    Padding { remaining: usize },
    /// Holding the padding of a supplied entry until its digest comes.
    Held { remaining: usize },
    /// A supplied entry passed whole; waiting for its digest.
    AwaitDigest,
    /// After the end blocks (or a header that could not be read).
    Raw,
}

/// The incremental `tar-entries-sha256` of a tar stream.
#[derive(Debug)]
pub struct EntriesDigest {
    outer: Sha256,
    inner: Sha256,
    block: Box<[u8; BLOCK]>,
    state: State,
    /// The next regular file's content digest will be supplied.
    expect: bool,
    /// Every regular file's content digest will be supplied.
    expect_all: bool,
    held: Vec<u8>,
}

impl Default for EntriesDigest {
    fn default() -> Self {
        Self::new()
    }
}

/// A digest the caller supplied out of turn, or did not supply.
#[derive(Debug, thiserror::Error)]
#[error("archive digest: {0}")]
pub struct DigestError(&'static str);

impl EntriesDigest {
    pub fn new() -> Self {
        EntriesDigest {
            outer: Sha256::new(),
            inner: Sha256::new(),
            block: Box::new([0; BLOCK]),
            state: State::Header { fill: 0 },
            expect: false,
            expect_all: false,
            held: Vec::new(),
        }
    }

    /// A digest whose every regular file's content SHA-256 is supplied by
    /// the caller ([`EntriesDigest::content_digest`]), in stream order:
    /// the verifier's, which takes them from the files as read back.
    /// Feed it with [`EntriesDigest::feed`].
    pub fn every_content_supplied() -> Self {
        EntriesDigest {
            expect_all: true,
            ..Self::new()
        }
    }

    /// Whether the stream fed so far stopped before the next entry for the
    /// digest of a regular file's content.
    pub fn awaits_digest(&self) -> bool {
        matches!(self.state, State::AwaitDigest)
    }

    /// The next regular file's content is not hashed here: its SHA-256
    /// comes from [`EntriesDigest::content_digest`] once it has passed
    /// (the writer of the archive hashed it already).
    pub fn expect_content_digest(&mut self) {
        self.expect = true;
    }

    /// The SHA-256 of the regular file announced by
    /// [`EntriesDigest::expect_content_digest`], after all of its content
    /// and padding passed through [`EntriesDigest::update`].
    pub fn content_digest(&mut self, sha256: &[u8; 32]) -> Result<(), DigestError> {
        if !matches!(self.state, State::AwaitDigest) {
            return Err(DigestError("a content digest was supplied out of turn"));
        }
        self.outer.update(sha256);
        self.outer.update(&self.held);
        self.held.clear();
        self.state = State::Header { fill: 0 };
        Ok(())
    }

    /// Feed the next bytes of the stream.
    pub fn update(&mut self, data: &[u8]) -> Result<(), DigestError> {
        if self.feed(data) < data.len() {
            return Err(DigestError(
                "the next entry started before the previous one's digest was supplied",
            ));
        }
        Ok(())
    }

    /// Feed the next bytes of the stream up to where a supplied content
    /// digest is due ([`EntriesDigest::awaits_digest`]); returns how many
    /// bytes were taken (the rest is to be fed again after the digest).
    pub fn feed(&mut self, all: &[u8]) -> usize {
        let mut data = all;
        while !data.is_empty() {
            match &mut self.state {
                State::Header { fill } => {
                    let k = (BLOCK - *fill).min(data.len());
                    self.block[*fill..*fill + k].copy_from_slice(&data[..k]);
                    *fill += k;
                    data = &data[k..];
                    if *fill == BLOCK {
                        self.header();
                    }
                }
                State::Content {
                    remaining,
                    pad,
                    supplied,
                } => {
                    let k = (*remaining).min(data.len() as u64) as usize;
                    if !*supplied {
                        self.inner.update(&data[..k]);
                    }
                    *remaining -= k as u64;
                    data = &data[k..];
                    if *remaining == 0 {
                        let (pad, supplied) = (*pad, *supplied);
                        self.content_done(pad, supplied);
                    }
                }
                State::Padding { remaining } => {
                    let k = (*remaining).min(data.len());
                    self.outer.update(&data[..k]);
                    *remaining -= k;
                    data = &data[k..];
                    if *remaining == 0 {
                        self.state = State::Header { fill: 0 };
                    }
                }
                State::Held { remaining } => {
                    let k = (*remaining).min(data.len());
                    self.held.extend_from_slice(&data[..k]);
                    *remaining -= k;
                    data = &data[k..];
                    if *remaining == 0 {
                        self.state = State::AwaitDigest;
                    }
                }
                State::AwaitDigest => break,
                State::Raw => {
                    self.outer.update(data);
                    data = &[];
                }
            }
        }
        all.len() - data.len()
    }

    /// A whole header block arrived.
    fn header(&mut self) {
        self.outer.update(&self.block[..]);
        if self.block.iter().all(|&b| b == 0) {
            self.state = State::Raw;
            return;
        }
        let h = tar::Header::from_byte_slice(&self.block[..]);
        let Ok(size) = h.entry_size() else {
            self.state = State::Raw;
            return;
        };
        let regular = matches!(
            h.entry_type(),
            tar::EntryType::Regular | tar::EntryType::Continuous
        ) || self.block[156] == 0;
        let supplied = (self.expect || self.expect_all) && regular;
        if supplied {
            self.expect = false;
        }
        let pad = ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize;
        if size == 0 {
            self.content_done(pad, supplied);
        } else {
            self.state = State::Content {
                remaining: size,
                pad,
                supplied,
            };
        }
    }

    /// An entry's content passed whole.
    fn content_done(&mut self, pad: usize, supplied: bool) {
        if supplied {
            self.state = if pad == 0 {
                State::AwaitDigest
            } else {
                State::Held { remaining: pad }
            };
            return;
        }
        let d = self.inner.finalize_reset();
        self.outer.update(d);
        self.state = if pad == 0 {
            State::Header { fill: 0 }
        } else {
            State::Padding { remaining: pad }
        };
    }

    /// The hex digest of everything fed. A stream that ended inside an
    /// entry still has a digest (it cannot equal a whole stream's).
    pub fn finalize(mut self) -> String {
        if let State::Content {
            supplied: false, ..
        } = self.state
        {
            let d = self.inner.finalize_reset();
            self.outer.update(d);
        }
        self.outer.update(&self.held);
        hex::encode(self.outer.finalize())
    }
}

/// The `tar-entries-sha256` of a whole stream in memory.
pub fn of(stream: &[u8]) -> String {
    let mut d = EntriesDigest::new();
    d.update(stream).expect("nothing is supplied");
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            b.append_data(&mut h, name, data).unwrap();
        };
        add("empty", b"");
        add("small", b"hello");
        add(&"long/".repeat(40), &[9u8; 1024]);
        add("odd", &[1u8; 700]);
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        b.append_data(&mut h, "dir", std::io::empty()).unwrap();
        b.into_inner().unwrap()
    }

    /// The digest does not depend on how the stream is cut into pieces.
    #[test]
    fn any_split_of_the_stream_gives_the_same_digest() {
        let a = archive();
        let whole = of(&a);
        for step in [1, 7, 511, 512, 513, 4096] {
            let mut d = EntriesDigest::new();
            for c in a.chunks(step) {
                d.update(c).unwrap();
            }
            assert_eq!(d.finalize(), whole, "pieces of {step}");
        }
    }

    /// Every byte counts: headers, content, padding, end blocks, and
    /// bytes after them, and a truncated stream differs.
    #[test]
    fn a_change_of_any_byte_or_a_truncation_changes_the_digest() {
        let a = archive();
        let whole = of(&a);
        for at in (0..a.len()).step_by(97).chain([a.len() - 1]) {
            let mut b = a.clone();
            b[at] ^= 0x20;
            assert_ne!(of(&b), whole, "byte {at} changed");
        }
        for cut in [1, 512, 1000, a.len() - 1024] {
            assert_ne!(of(&a[..a.len() - cut]), whole, "cut {cut}");
        }
        let mut longer = a.clone();
        longer.push(0);
        assert_ne!(of(&longer), whole);
    }

    /// Supplying each regular file's digest gives what hashing it here
    /// gives; supplying out of turn is an error.
    #[test]
    fn supplied_content_digests_equal_hashing_the_content() {
        let mut a = Vec::new();
        let mut d = EntriesDigest::new();
        for (name, data) in [("f", &b"abc"[..]), ("g", &[5u8; 512][..]), ("h", b"")] {
            let mut b = tar::Builder::new(Vec::new());
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            b.append_data(&mut h, name, data).unwrap();
            let bytes = b.into_inner().unwrap();
            let entry = &bytes[..bytes.len() - 1024];
            d.expect_content_digest();
            d.update(entry).unwrap();
            d.content_digest(&Sha256::digest(data).into()).unwrap();
            a.extend_from_slice(entry);
        }
        a.extend_from_slice(&[0u8; 1024]);
        d.update(&[0u8; 1024]).unwrap();
        assert_eq!(d.finalize(), of(&a));
        let mut d = EntriesDigest::new();
        assert!(d.content_digest(&[0; 32]).is_err());
    }
}

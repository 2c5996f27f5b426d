//! Extraction and verification *inside* the sandbox, with POSIX tools only
//! (busybox is enough). The sandbox reports, NUL-separated, the archive
//! digest, the extracted directories, symlinks with targets, executable
//! files and every file's sha256; [`parse_report`] turns that back into a
//! [`Manifest`] to compare with the expected one. Names are never split on
//! newlines and never sorted remotely, so odd names, locale and collation
//! cannot cause false mismatches.
//!
//! Cost: the archive is hashed while it is extracted (from the uploaded
//! file, or from standard input through `tee` when the provider streams);
//! the extracted files are hashed in parallel batches (`xargs -P`, one
//! process per core), each batch reporting its own names and sums so the
//! pairing never depends on scheduling. A batch holds the files divided
//! evenly over the cores, at most 2048: every batch starts a shell and a
//! hash process (openssl's start-up alone costs milliseconds), and on a
//! 20,000-file tree batches of 256 took twice the CPU time of batches of
//! 2048. The hash is `openssl dgst -sha256`
//! when the sandbox has an openssl that hashes a known vector right (it uses
//! the CPU's SHA extensions), `sha256sum` otherwise. GNU tar reads the
//! archive in 128 KiB records (`-B -b 256`) rather than its default 10 KiB:
//! each read is a system call and a wake-up of the process feeding it.

use super::manifest::{Entry, Manifest};

/// Exit codes of [`SCRIPT`] with their meaning.
pub const EXIT_MISSING_TOOL: i32 = 90;
pub const EXIT_DEST_EXISTS: i32 = 91;
pub const EXIT_MKDIR: i32 = 92;
pub const EXIT_EXTRACT: i32 = 93;
pub const EXIT_DIGEST: i32 = 94;
pub const EXIT_DECOMPRESS: i32 = 95;

/// The archive argument meaning "read the archive from standard input".
pub const STDIN: &str = "-";

/// `sh -c SCRIPT rfs-verify ARCHIVE DEST AUX [DECOMPRESSOR [STAMP]]`:
/// ARCHIVE is a file in the sandbox or [`STDIN`]; AUX is a scratch
/// directory (created, then removed); DECOMPRESSOR (`gzip`, or empty) when
/// the transfer is compressed; STAMP, when given, is touched with a time one
/// second before the end of the sync, so a re-sync can tell which files
/// steps wrote since ([`super::resync_remote`]).
pub const SCRIPT: &str = r#"set -u
LC_ALL=C; export LC_ALL
arc=$1; dest=$2; aux=$3; z=${4:-}
need() { command -v "$1" >/dev/null 2>&1 || { echo "required tool '$1' is missing in the sandbox$2" >&2; exit 90; }; }
if command -v openssl >/dev/null 2>&1 && [ "$(printf abc | openssl dgst -sha256 -r 2>/dev/null | cut -c1-64)" = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad ]; then
  H='openssl dgst -sha256 -r'
else
  need sha256sum ""; H=sha256sum
fi
for t in tar find mkdir readlink cut tr xargs mktemp; do need "$t" ""; done
if [ "$arc" = - ] || [ -n "$z" ]; then need tee ""; need mkfifo ""; fi
if [ -n "$z" ]; then need "$z" " (the transfer is compressed)"; fi
X=; case $(tar --version 2>/dev/null) in *'GNU tar'*) X='-B -b 256';; esac
if [ -e "$dest" ] || [ -L "$dest" ]; then echo "destination $dest already exists in the sandbox" >&2; exit 91; fi
mkdir -p -- "$dest" || exit 92
mkdir -- "$aux" || exit 92
unpack() { if [ -n "$z" ]; then "$z" -dc 2>"$aux/zerr" || : >"$aux/zfail"; else cat; fi; }
if [ "$arc" = - ] || [ -n "$z" ]; then
  mkfifo "$aux/fifo" || exit 92
  $H <"$aux/fifo" >"$aux/sum" 2>&1 &
  spid=$!
  if [ "$arc" = - ] && [ -z "$z" ]; then tee "$aux/fifo"
  elif [ "$arc" = - ]; then unpack | tee "$aux/fifo"
  else unpack <"$arc" | tee "$aux/fifo"
  fi | { tar $X -xf - -C "$dest" 2>"$aux/err" || : >"$aux/tarfail"; cat >/dev/null; }
  wait "$spid"; src=$?
  if [ -e "$aux/zfail" ]; then head -c 500 "$aux/zerr" >&2; exit 95; fi
  if [ -e "$aux/tarfail" ]; then head -c 500 "$aux/err" >&2; exit 93; fi
else
  $H "$arc" >"$aux/sum" 2>&1 &
  spid=$!
  if ! tar $X -xf "$arc" -C "$dest" 2>"$aux/err"; then
    wait "$spid"; head -c 500 "$aux/err" >&2; exit 93
  fi
  wait "$spid"; src=$?
fi
[ "$src" = 0 ] || { head -c 500 "$aux/sum" >&2; exit 94; }
cd -P -- "$dest" || exit 92
printf 'ROOT\0%s\0' "$PWD"
printf 'ARCHIVE\0'; cut -c1-64 "$aux/sum" | tr -d '\n'; printf '\0'
printf 'DIRS\0'; find . -type d -print0
printf 'LINKS\0'; find . -type l -exec sh -c 'for p do printf "%s\0" "$p"; readlink "$p"; printf "\0"; done' sh {} +
printf 'EXEC\0'; find . -type f -perm -100 -print0
printf 'FILES\0'
j=$(nproc 2>/dev/null) || j=1
case $j in ''|*[!0-9]*) j=1;; esac; [ "$j" -ge 1 ] || j=1
P=; if [ "$j" -gt 1 ] && echo x | xargs -P 2 true 2>/dev/null; then P="-P $j"; fi
find . -type f -print0 >"$aux/files"
n=$(tr -cd '\0' <"$aux/files" | head -c $((2048 * j)) | tr '\0' '\n' | { c=0; while read -r _; do c=$((c + 1)); done; echo "$c"; })
n=$(( (n + j - 1) / j )); [ "$n" -ge 1 ] || n=1
xargs -0 -r $P -n "$n" sh -c 'o=$(mktemp "$0/b.XXXXXX") || exit 255; { printf "BATCH\0"; printf "%s\0" "$@"; printf SUMS; '"$H"' "$@"; printf "\0"; } >"$o"' "$aux" <"$aux/files"
for b in "$aux"/b.*; do [ -f "$b" ] && cat "$b"; done
printf 'END\0'
if [ -n "${5:-}" ]; then touch -d "@$(( $(date +%s) - 1 ))" "$5" 2>/dev/null || rm -f -- "$5"; fi
rm -rf -- "$aux"
[ "$arc" = - ] || rm -f -- "$arc"
"#;

/// What the sandbox reported.
#[derive(Debug)]
pub struct Report {
    /// The synced root's physical path in the sandbox (symlinks resolved).
    pub physical_root: String,
    pub archive_sha256: String,
    pub manifest: Manifest,
}

/// What is malformed in a verification report (the sandbox controls its
/// bytes, so each is a refusal of the sync, never a panic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("verification report: expected section {expected}, found {found:?}")]
    UnexpectedSection {
        expected: &'static str,
        found: Option<String>,
    },
    #[error("verification report: {0} section missing")]
    SectionMissing(&'static str),
    #[error("verification report: link target missing")]
    LinkTargetMissing,
    #[error("verification report is truncated (no END marker)")]
    Truncated,
    #[error("verification report: {0} reported twice")]
    ReportedTwice(String),
    #[error("verification report: more checksums than files")]
    ExtraChecksums,
    #[error("verification report: malformed checksum line for {0}")]
    MalformedChecksum(String),
    #[error("verification report: unexpected record {0:?}")]
    UnexpectedRecord(String),
}

/// Parse the script's stdout. Errors name what was malformed.
pub fn parse_report(out: &[u8]) -> Result<Report, ReportError> {
    let mut fields = out.split(|b| *b == 0);
    let expect =
        |name: &'static str, f: &mut dyn Iterator<Item = &[u8]>| -> Result<(), ReportError> {
            match f.next() {
                Some(x) if x == name.as_bytes() => Ok(()),
                other => Err(ReportError::UnexpectedSection {
                    expected: name,
                    found: other.map(|o| String::from_utf8_lossy(o).into_owned()),
                }),
            }
        };
    expect("ROOT", &mut fields)?;
    let physical_root = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
    expect("ARCHIVE", &mut fields)?;
    let archive_sha256 = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
    expect("DIRS", &mut fields)?;
    let mut m = Manifest::default();
    let mut next = fields.next();
    while let Some(p) = next.filter(|p| p.starts_with(b".")) {
        if let Some(rel) = rel(p) {
            m.entries.insert(rel.to_vec(), Entry::Dir);
        }
        next = fields.next();
    }
    if next != Some(b"LINKS") {
        return Err(ReportError::SectionMissing("LINKS"));
    }
    next = fields.next();
    while let Some(p) = next.filter(|p| p.starts_with(b"./")) {
        let mut target = fields.next().ok_or(ReportError::LinkTargetMissing)?;
        if let Some(t) = target.strip_suffix(b"\n") {
            target = t;
        }
        m.entries.insert(
            rel(p).unwrap_or(p).to_vec(),
            Entry::Symlink {
                target: target.to_vec(),
            },
        );
        next = fields.next();
    }
    if next != Some(b"EXEC") {
        return Err(ReportError::SectionMissing("EXEC"));
    }
    let mut exec = std::collections::BTreeSet::new();
    next = fields.next();
    while let Some(p) = next.filter(|p| p.starts_with(b"./")) {
        exec.insert(rel(p).unwrap_or(p).to_vec());
        next = fields.next();
    }
    if next != Some(b"FILES") {
        return Err(ReportError::SectionMissing("FILES"));
    }
    // Batches of `BATCH\0 name\0… SUMS<sum lines>\0`, in any order, then
    // END. Each batch pairs its own names with its own sums, in order; a
    // SUMS block may contain no NUL itself.
    loop {
        match fields.next() {
            Some(b"END") => break,
            Some(b"BATCH") => {}
            _ => return Err(ReportError::Truncated),
        }
        let mut files: Vec<&[u8]> = vec![];
        let mut next = fields.next();
        while let Some(p) = next.filter(|p| p.starts_with(b"./")) {
            files.push(p);
            next = fields.next();
        }
        let sums = next
            .filter(|s| s.starts_with(b"SUMS"))
            .ok_or(ReportError::SectionMissing("SUMS"))?;
        let mut sums = &sums[4..];
        for f in files {
            let (sha, rest) = parse_sum_line(sums, f)?;
            sums = rest;
            let key = rel(f).unwrap_or(f).to_vec();
            let is_exec = exec.contains(&key);
            let entry = Entry::File {
                exec: is_exec,
                sha256: sha,
                size: 0,
            };
            if m.entries.insert(key, entry).is_some() {
                return Err(ReportError::ReportedTwice(
                    String::from_utf8_lossy(f).into_owned(),
                ));
            }
        }
        if !sums.is_empty() {
            return Err(ReportError::ExtraChecksums);
        }
    }
    Ok(Report {
        physical_root,
        archive_sha256,
        manifest: m,
    })
}

/// `./a/b` → `a/b`; `.` → None.
pub fn rel(p: &[u8]) -> Option<&[u8]> {
    p.strip_prefix(b"./")
}

/// One `sha256sum` line for `name`, in GNU (escaped names) or busybox
/// (raw names) form. Returns the digest and the rest.
pub fn parse_sum_line<'a>(s: &'a [u8], name: &[u8]) -> Result<(String, &'a [u8]), ReportError> {
    let bad = || ReportError::MalformedChecksum(String::from_utf8_lossy(name).into_owned());
    let (escaped, s) = match s.strip_prefix(b"\\") {
        Some(r) => (true, r),
        None => (false, s),
    };
    if s.len() < 66 || !s[..64].iter().all(u8::is_ascii_hexdigit) {
        return Err(bad());
    }
    let sha = String::from_utf8_lossy(&s[..64]).into_owned();
    let s = &s[64..];
    let s = s
        .strip_prefix(b"  ")
        .or_else(|| s.strip_prefix(b" *"))
        .ok_or_else(bad)?;
    // GNU escapes `\\`, newline and CR; OpenSSL 3 escapes newline and
    // backslash only. Either way the line must be exactly the expected name.
    let wants = if escaped {
        vec![escape(name, true), escape(name, false)]
    } else {
        vec![name.to_vec()]
    };
    for want in wants {
        if let Some(rest) = s
            .strip_prefix(want.as_slice())
            .and_then(|r| r.strip_prefix(b"\n"))
        {
            return Ok((sha, rest));
        }
    }
    Err(bad())
}

/// The escaping of file names in checksum lines: GNU coreutils' (with
/// `cr`), or OpenSSL's (without).
fn escape(name: &[u8], cr: bool) -> Vec<u8> {
    let mut o = Vec::with_capacity(name.len());
    for &b in name {
        match b {
            b'\\' => o.extend_from_slice(b"\\\\"),
            b'\n' => o.extend_from_slice(b"\\n"),
            b'\r' if cr => o.extend_from_slice(b"\\r"),
            _ => o.push(b),
        }
    }
    o
}

/// Expected manifest as the sandbox can observe it (sizes are not reported).
pub fn observable(m: &Manifest) -> Manifest {
    let mut o = m.clone();
    for e in o.entries.values_mut() {
        if let Entry::File { size, .. } = e {
            *size = 0;
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(body: &[u8]) -> Vec<u8> {
        body.to_vec()
    }

    #[test]
    fn parses_gnu_escaped_and_raw_names() {
        let h = "a".repeat(64);
        let mut r = Vec::new();
        r.extend_from_slice(b"ROOT\0/x\0ARCHIVE\0");
        r.extend_from_slice(h.as_bytes());
        r.extend_from_slice(
            b"\0DIRS\0.\0./d\0LINKS\0./l\0target\n\0EXEC\0./d/x\0FILES\0BATCH\0./d/x\0./new\nline\0SUMS",
        );
        r.extend_from_slice(format!("{h}  ./d/x\n\\{h}  ./new\\nline\n").as_bytes());
        r.extend_from_slice(b"\0END\0");
        let rep = parse_report(&report(&r)).unwrap();
        assert_eq!(rep.archive_sha256, h);
        assert_eq!(rep.manifest.entries.len(), 4);
        assert_eq!(
            rep.manifest.entries[&b"l"[..]],
            Entry::Symlink {
                target: b"target".to_vec()
            }
        );
        assert!(matches!(
            rep.manifest.entries[&b"d/x"[..]],
            Entry::File { exec: true, .. }
        ));
        assert!(matches!(
            rep.manifest.entries[&b"new\nline"[..]],
            Entry::File { exec: false, .. }
        ));
    }

    #[test]
    fn truncated_report_is_an_error() {
        let r = b"ROOT\0/x\0ARCHIVE\0x\0DIRS\0.\0LINKS\0EXEC\0FILES\0BATCH\0./a\0SUMS";
        assert!(parse_report(r).is_err());
        let r = b"ROOT\0/x\0ARCHIVE\0x\0DIRS\0.\0LINKS\0EXEC\0FILES\0";
        assert_eq!(parse_report(r).unwrap_err(), ReportError::Truncated);
    }

    fn with_batches(batches: &[(&[&str], String)]) -> Vec<u8> {
        let mut r = b"ROOT\0/x\0ARCHIVE\0h\0DIRS\0.\0LINKS\0EXEC\0FILES\0".to_vec();
        for (names, sums) in batches {
            r.extend_from_slice(b"BATCH\0");
            for n in *names {
                r.extend_from_slice(n.as_bytes());
                r.push(0);
            }
            r.extend_from_slice(b"SUMS");
            r.extend_from_slice(sums.as_bytes());
            r.push(0);
        }
        r.extend_from_slice(b"END\0");
        r
    }

    /// Parallel batches arrive in any order; each pairs its own names and
    /// sums, so the manifest does not depend on scheduling.
    #[test]
    fn batches_in_any_order_pair_their_own_names() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let one = (&["./x"][..], format!("{a} *./x\n"));
        let two = (&["./y", "./z"][..], format!("{b}  ./y\n{a}  ./z\n"));
        let m1 = parse_report(&with_batches(&[one.clone(), two.clone()])).unwrap();
        let m2 = parse_report(&with_batches(&[two, one])).unwrap();
        assert_eq!(m1.manifest, m2.manifest);
        assert!(
            matches!(&m1.manifest.entries[&b"y"[..]], Entry::File { sha256, .. } if *sha256 == b)
        );
    }

    #[test]
    fn a_batch_with_fewer_sums_than_names_is_an_error() {
        let a = "a".repeat(64);
        let r = with_batches(&[(&["./x", "./y"][..], format!("{a}  ./x\n"))]);
        assert_eq!(
            parse_report(&r).unwrap_err(),
            ReportError::MalformedChecksum("./y".into())
        );
    }

    #[test]
    fn a_file_reported_by_two_batches_is_an_error() {
        let a = "a".repeat(64);
        let line = format!("{a}  ./x\n");
        let r = with_batches(&[(&["./x"][..], line.clone()), (&["./x"][..], line)]);
        assert_eq!(
            parse_report(&r).unwrap_err(),
            ReportError::ReportedTwice("./x".into())
        );
    }

    /// OpenSSL escapes newlines and backslashes but not CR.
    #[test]
    fn openssl_escaping_without_cr_is_accepted() {
        let a = "a".repeat(64);
        let r = with_batches(&[(&["./n\nl\rc"][..], format!("\\{a} *./n\\nl\rc\n"))]);
        assert!(parse_report(&r).is_ok());
    }
}

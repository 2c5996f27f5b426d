//! Extraction and verification *inside* the sandbox, with POSIX tools only
//! (busybox is enough). The sandbox reports, NUL-separated, the archive
//! digest, the extracted directories, symlinks with targets, executable
//! files and every file's sha256; [`parse_report`] turns that back into a
//! [`Manifest`] to compare with the expected one. Names are never split on
//! newlines and never sorted remotely, so odd names, locale and collation
//! cannot cause false mismatches.

use super::manifest::{Entry, Manifest};

/// Exit codes of [`SCRIPT`] with their meaning.
pub const EXIT_MISSING_TOOL: i32 = 90;
pub const EXIT_DEST_EXISTS: i32 = 91;
pub const EXIT_MKDIR: i32 = 92;
pub const EXIT_EXTRACT: i32 = 93;
pub const EXIT_DIGEST: i32 = 94;

/// `sh -c SCRIPT rfs-verify ARCHIVE DEST`.
pub const SCRIPT: &str = r#"set -u
LC_ALL=C; export LC_ALL
arc=$1; dest=$2
for t in sha256sum tar find mkdir readlink cut tr; do
  command -v "$t" >/dev/null 2>&1 || { echo "required tool '$t' is missing in the sandbox" >&2; exit 90; }
done
if [ -e "$dest" ] || [ -L "$dest" ]; then echo "destination $dest already exists in the sandbox" >&2; exit 91; fi
sha256sum "$arc" >"$arc.sha256" 2>&1 &
spid=$!
mkdir -p -- "$dest" || { wait "$spid"; exit 92; }
if ! tar -xf "$arc" -C "$dest" 2>"$arc.err"; then
  wait "$spid"; head -c 500 "$arc.err" >&2; exit 93
fi
wait "$spid" || { head -c 500 "$arc.sha256" >&2; exit 94; }
cd -P -- "$dest" || exit 92
printf 'ROOT\0%s\0' "$PWD"
printf 'ARCHIVE\0'; cut -c1-64 "$arc.sha256" | tr -d '\n'; printf '\0'
printf 'DIRS\0'; find . -type d -print0
printf 'LINKS\0'; find . -type l -exec sh -c 'for p do printf "%s\0" "$p"; readlink "$p"; printf "\0"; done' sh {} +
printf 'EXEC\0'; find . -type f -perm -100 -print0
printf 'FILES\0'; find . -type f -print0
printf 'SUMS'; find . -type f -exec sha256sum {} +
printf '\0END\0'
rm -f -- "$arc" "$arc.sha256" "$arc.err"
"#;

/// What the sandbox reported.
#[derive(Debug)]
pub struct Report {
    /// The synced root's physical path in the sandbox (symlinks resolved).
    pub physical_root: String,
    pub archive_sha256: String,
    pub manifest: Manifest,
}

/// Parse the script's stdout. Errors name what was malformed.
pub fn parse_report(out: &[u8]) -> Result<Report, String> {
    let mut fields = out.split(|b| *b == 0);
    let expect = |name: &str, f: &mut dyn Iterator<Item = &[u8]>| -> Result<(), String> {
        match f.next() {
            Some(x) if x == name.as_bytes() => Ok(()),
            other => Err(format!(
                "verification report: expected section {name}, found {:?}",
                other.map(String::from_utf8_lossy)
            )),
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
        return Err("verification report: LINKS section missing".into());
    }
    next = fields.next();
    while let Some(p) = next.filter(|p| p.starts_with(b"./")) {
        let mut target = fields
            .next()
            .ok_or("verification report: link target missing")?;
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
        return Err("verification report: EXEC section missing".into());
    }
    let mut exec = std::collections::BTreeSet::new();
    next = fields.next();
    while let Some(p) = next.filter(|p| p.starts_with(b"./")) {
        exec.insert(rel(p).unwrap_or(p).to_vec());
        next = fields.next();
    }
    if next != Some(b"FILES") {
        return Err("verification report: FILES section missing".into());
    }
    let mut files: Vec<&[u8]> = vec![];
    next = fields.next();
    while let Some(p) = next.filter(|p| p.starts_with(b"./")) {
        files.push(p);
        next = fields.next();
    }
    // SUMS runs to the final NUL before END; it may contain no NUL itself.
    let sums = next
        .filter(|s| s.starts_with(b"SUMS"))
        .ok_or("verification report: SUMS section missing")?;
    let mut sums = &sums[4..];
    if fields.next() != Some(b"END") {
        return Err("verification report is truncated (no END marker)".into());
    }
    for f in files {
        let (sha, rest) = parse_sum_line(sums, f)?;
        sums = rest;
        let key = rel(f).unwrap_or(f).to_vec();
        let is_exec = exec.contains(&key);
        m.entries.insert(
            key,
            Entry::File {
                exec: is_exec,
                sha256: sha,
                size: 0,
            },
        );
    }
    if !sums.is_empty() {
        return Err("verification report: more checksums than files".into());
    }
    Ok(Report {
        physical_root,
        archive_sha256,
        manifest: m,
    })
}

/// `./a/b` → `a/b`; `.` → None.
fn rel(p: &[u8]) -> Option<&[u8]> {
    p.strip_prefix(b"./")
}

/// One `sha256sum` line for `name`, in GNU (escaped names) or busybox
/// (raw names) form. Returns the digest and the rest.
fn parse_sum_line<'a>(s: &'a [u8], name: &[u8]) -> Result<(String, &'a [u8]), String> {
    let bad = || {
        format!(
            "verification report: malformed checksum line for {}",
            String::from_utf8_lossy(name)
        )
    };
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
    let want = if escaped { escape(name) } else { name.to_vec() };
    let s = s.strip_prefix(want.as_slice()).ok_or_else(bad)?;
    let s = s.strip_prefix(b"\n").ok_or_else(bad)?;
    Ok((sha, s))
}

/// GNU coreutils' escaping of file names in checksum lines.
fn escape(name: &[u8]) -> Vec<u8> {
    let mut o = Vec::with_capacity(name.len());
    for &b in name {
        match b {
            b'\\' => o.extend_from_slice(b"\\\\"),
            b'\n' => o.extend_from_slice(b"\\n"),
            b'\r' => o.extend_from_slice(b"\\r"),
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
            b"\0DIRS\0.\0./d\0LINKS\0./l\0target\n\0EXEC\0./d/x\0FILES\0./d/x\0./new\nline\0SUMS",
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
        let r = b"ROOT\0/x\0ARCHIVE\0x\0DIRS\0.\0LINKS\0EXEC\0FILES\0SUMS";
        assert!(parse_report(r).unwrap_err().contains("END"));
    }
}

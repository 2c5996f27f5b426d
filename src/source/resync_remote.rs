//! The re-sync's two commands inside the sandbox, with POSIX tools only
//! (busybox is enough), and their reports.
//!
//! 1. [`INSPECT`] lists the synced root (directories, symlinks with
//!    targets, executable files, files) and names the files written since
//!    the last sync's time stamp, reading no content.
//! 2. [`APPLY`] removes what the plan says, extracts the delta archive with
//!    `tar -m` (shipped files get the time of the re-sync, so incremental
//!    builds kept from earlier steps see them as changed) while hashing the
//!    archive, lists the whole root again and hashes every file written
//!    since just before the change, then renews the time stamp.
//!
//! The time stamp is a file outside the synced root whose modification time
//! is one second before the end of the last sync (busybox compares whole
//! seconds), written by the first sync's verification and by every
//! re-sync. Without it every tracked file counts as written.
//!
//! Reports are NUL-separated like the first sync's ([`super::remote_check`]).

use std::collections::BTreeSet;

use super::manifest::Entry;
use super::remote_check::{parse_sum_line, rel};
use super::resync::Listing;

/// The shell's hash selection and tool checks, shared by both scripts.
const PRELUDE: &str = r#"set -u
LC_ALL=C; export LC_ALL
need() { command -v "$1" >/dev/null 2>&1 || { echo "required tool '$1' is missing in the sandbox" >&2; exit 90; }; }
if command -v openssl >/dev/null 2>&1 && [ "$(printf abc | openssl dgst -sha256 -r 2>/dev/null | cut -c1-64)" = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad ]; then
  H='openssl dgst -sha256 -r'
else
  need sha256sum; H=sha256sum
fi
for t in tar find mkdir readlink cut tr xargs touch date rm rmdir; do need "$t"; done
"#;

/// Listing of the current directory: the same sections as a first sync.
const LISTING: &str = r#"printf 'DIRS\0'; find . -type d -print0
printf 'LINKS\0'; find . -type l -exec sh -c 'for p do printf "%s\0" "$p"; readlink "$p"; printf "\0"; done' sh {} +
printf 'EXEC\0'; find . -type f -perm -100 -print0
printf 'FILES\0'; find . -type f -print0
"#;

/// Exit code: the synced root is gone (or is not a directory).
pub const EXIT_ROOT_GONE: i32 = 92;
/// Exit code: a path could not be removed.
pub const EXIT_REMOVE: i32 = 96;
pub use super::remote_check::{EXIT_DIGEST, EXIT_EXTRACT, EXIT_MISSING_TOOL};

/// `sh -c INSPECT rfs-inspect DEST STAMP`.
pub fn inspect_script() -> String {
    format!(
        r#"{PRELUDE}dest=$1; stamp=$2
cd -P -- "$dest" 2>/dev/null || {{ echo "the synced root $dest is gone from the sandbox" >&2; exit 92; }}
printf 'ROOT\0%s\0' "$PWD"
{LISTING}printf 'NEWER\0'
if [ -f "$stamp" ]; then find . -type f -newer "$stamp" -print0; else printf 'NOSTAMP\0'; fi
printf 'END\0'
"#
    )
}

/// `sh -c APPLY rfs-apply ARCHIVE DEST AUX STAMP [R<path>|D<path>]...`:
/// ARCHIVE is the uploaded delta tar (or `none`), `R` paths are removed
/// whole, `D` paths are removed when empty (in the order given), all
/// relative to DEST.
pub fn apply_script() -> String {
    format!(
        r#"{PRELUDE}arc=$1; dest=$2; aux=$3; stamp=$4; shift 4
cd -P -- "$dest" 2>/dev/null || {{ echo "the synced root $dest is gone from the sandbox" >&2; exit 92; }}
rm -rf -- "$aux"; mkdir -- "$aux" || exit 92
touch -d "@$(( $(date +%s) - 1 ))" "$aux/pre" || exit 92
for a do
  p=${{a#?}}
  case $a in
    R*) rm -rf -- "./$p" || {{ echo "cannot remove $p" >&2; exit 96; }} ;;
    D*) rmdir -- "./$p" 2>/dev/null || : ;;
  esac
done
if [ "$arc" != none ]; then
  $H "$arc" >"$aux/sum" 2>&1 &
  spid=$!
  if ! tar -xmf "$arc" -C . 2>"$aux/err"; then wait "$spid"; head -c 500 "$aux/err" >&2; exit 93; fi
  wait "$spid" || {{ head -c 500 "$aux/sum" >&2; exit 94; }}
fi
printf 'ROOT\0%s\0' "$PWD"
printf 'ARCHIVE\0'; [ -f "$aux/sum" ] && cut -c1-64 "$aux/sum" | tr -d '\n'; printf '\0'
{LISTING}printf 'HASHED\0'
find . -type f -newer "$aux/pre" -print0 | xargs -0 -r -n 256 sh -c '{{ printf "BATCH\0"; printf "%s\0" "$@"; printf SUMS; '"$H"' "$@"; printf "\0"; }}' sh
printf 'END\0'
touch -d "@$(( $(date +%s) - 1 ))" "$stamp" 2>/dev/null || rm -f -- "$stamp"
rm -rf -- "$aux"
[ "$arc" = none ] || rm -f -- "$arc"
"#
    )
}

/// The argv tail of [`apply_script`] for a plan's removals.
pub fn removal_args(remove: &[Vec<u8>], rmdir: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let tag = |t: u8, p: &Vec<u8>| {
        let mut a = vec![t];
        a.extend_from_slice(p);
        a
    };
    remove
        .iter()
        .map(|p| tag(b'R', p))
        .chain(rmdir.iter().map(|p| tag(b'D', p)))
        .collect()
}

/// Parse [`inspect_script`]'s (`with_archive` false) or [`apply_script`]'s
/// (true) report.
pub fn parse_listing(out: &[u8], with_archive: bool) -> Result<Listing, String> {
    let mut f = out.split(|b| *b == 0).peekable();
    let mut l = Listing {
        stamp_ok: true,
        ..Listing::default()
    };
    expect("ROOT", &mut f)?;
    l.physical_root = String::from_utf8_lossy(f.next().unwrap_or_default()).into_owned();
    if with_archive {
        expect("ARCHIVE", &mut f)?;
        l.archive_sha256 = String::from_utf8_lossy(f.next().unwrap_or_default()).into_owned();
    }
    expect("DIRS", &mut f)?;
    for p in names(&mut f) {
        if let Some(r) = rel(p) {
            l.entries.entries.insert(r.to_vec(), Entry::Dir);
        }
    }
    expect("LINKS", &mut f)?;
    while let Some(p) = f.next_if(|p| p.starts_with(b"./")) {
        let mut target = f.next().ok_or("re-sync report: link target missing")?;
        if let Some(t) = target.strip_suffix(b"\n") {
            target = t;
        }
        l.entries.entries.insert(
            rel(p).unwrap_or(p).to_vec(),
            Entry::Symlink {
                target: target.to_vec(),
            },
        );
    }
    expect("EXEC", &mut f)?;
    let exec: BTreeSet<&[u8]> = names(&mut f).into_iter().filter_map(rel).collect();
    expect("FILES", &mut f)?;
    for p in names(&mut f).into_iter().filter_map(rel) {
        let entry = Entry::File {
            exec: exec.contains(p),
            sha256: String::new(),
            size: 0,
        };
        if l.entries.entries.insert(p.to_vec(), entry).is_some() {
            return Err(format!(
                "re-sync report: {} reported twice",
                String::from_utf8_lossy(p)
            ));
        }
    }
    if with_archive {
        expect("HASHED", &mut f)?;
        loop {
            match f.next() {
                Some(b"END") => break,
                Some(b"BATCH") => {}
                _ => return Err("re-sync report is truncated (no END marker)".into()),
            }
            let files = names(&mut f);
            let sums = f
                .next()
                .filter(|s| s.starts_with(b"SUMS"))
                .ok_or("re-sync report: SUMS section missing")?;
            let mut sums = &sums[4..];
            for p in files {
                let (sha, rest) = parse_sum_line(sums, p)?;
                sums = rest;
                l.hashed.insert(rel(p).unwrap_or(p).to_vec(), sha);
            }
            if !sums.is_empty() {
                return Err("re-sync report: more checksums than files".into());
            }
        }
    } else {
        expect("NEWER", &mut f)?;
        if f.next_if(|p| *p == b"NOSTAMP").is_some() {
            l.stamp_ok = false;
        }
        for p in names(&mut f).into_iter().filter_map(rel) {
            l.newer.insert(p.to_vec());
        }
        expect("END", &mut f)?;
    }
    Ok(l)
}

fn expect<'a>(name: &str, f: &mut impl Iterator<Item = &'a [u8]>) -> Result<(), String> {
    match f.next() {
        Some(x) if x == name.as_bytes() => Ok(()),
        other => Err(format!(
            "re-sync report: expected section {name}, found {:?}",
            other.map(String::from_utf8_lossy)
        )),
    }
}

/// The names (`.`-prefixed fields) up to the next section marker.
fn names<'a, I: Iterator<Item = &'a [u8]>>(f: &mut std::iter::Peekable<I>) -> Vec<&'a [u8]> {
    let mut v = vec![];
    while let Some(p) = f.next_if(|p| p.starts_with(b".")) {
        v.push(p);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_inspection_with_odd_names() {
        let r = b"ROOT\0/w\0DIRS\0.\0./d\0LINKS\0./l\0t\n\0EXEC\0./d/x\0FILES\0./d/x\0./n\nl\0NEWER\0./n\nl\0END\0";
        let l = parse_listing(r, false).unwrap();
        assert_eq!(l.physical_root, "/w");
        assert!(l.stamp_ok);
        assert_eq!(l.entries.entries.len(), 4);
        assert!(matches!(
            l.entries.entries[&b"d/x"[..]],
            Entry::File { exec: true, .. }
        ));
        assert!(l.newer.contains(&b"n\nl"[..]));
    }

    #[test]
    fn a_missing_stamp_is_reported() {
        let r = b"ROOT\0/w\0DIRS\0.\0LINKS\0EXEC\0FILES\0./a\0NEWER\0NOSTAMP\0END\0";
        assert!(!parse_listing(r, false).unwrap().stamp_ok);
    }

    #[test]
    fn a_truncated_report_is_an_error() {
        let r = b"ROOT\0/w\0DIRS\0.\0LINKS\0EXEC\0FILES\0./a\0NEWER\0";
        assert!(parse_listing(r, false).is_err());
        let h = "a".repeat(64);
        let mut r =
            b"ROOT\0/w\0ARCHIVE\0s\0DIRS\0.\0LINKS\0EXEC\0FILES\0./a\0HASHED\0BATCH\0./a\0SUMS"
                .to_vec();
        r.extend_from_slice(format!("{h}  ./a\n").as_bytes());
        r.push(0);
        assert!(parse_listing(&r, true).unwrap_err().contains("END"));
        r.extend_from_slice(b"END\0");
        let l = parse_listing(&r, true).unwrap();
        assert_eq!(l.hashed[&b"a"[..]], h);
        assert_eq!(l.archive_sha256, "s");
    }
}

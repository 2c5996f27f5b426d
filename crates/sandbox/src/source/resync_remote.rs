//! The re-sync's commands inside the sandbox, with POSIX tools only
//! (busybox is enough), and their reports.
//!
//! 1. [`inspect_script`] lists the synced root (directories, symlinks with
//!    targets, executable files, files) and names the files written since
//!    the last sync's time stamp, reading no content.
//! 2. [`hash_script`] hashes the files it is given by name: the tracked
//!    files written since the last sync, before the plan (whether their
//!    content still is the commit's decides whether they travel again),
//!    and after the change any tracked file something else wrote meanwhile.
//! 3. [`apply_script`] removes what the plan says, extracts the delta
//!    archive with `tar -m` (shipped files get the time of the re-sync, so
//!    incremental builds kept from earlier steps see them as changed) while
//!    hashing the archive, hashes the files it shipped (named by the plan:
//!    nothing else is read, however much else was written meanwhile), lists
//!    the whole root again naming the files written since just before the
//!    change, then renews the time stamp.
//!
//! The time stamp is a file outside the synced root whose modification time
//! is one second before the end of the last sync (busybox compares whole
//! seconds), written by the first sync's verification and by every
//! re-sync. Without it every tracked file counts as written.
//!
//! Reports are NUL-separated like the first sync's ([`super::remote_check`]).

use std::collections::BTreeSet;

use super::delta::Listing;
use super::manifest::Entry;
use super::remote_check::{parse_sum_line, rel, ReportError};

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
dec() { case $1 in *\\*) p=$(printf '%bx' "$1"); p=${p%x} ;; *) p=$1 ;; esac; }
sums() { xargs -0 -r -n 256 sh -c '{ printf "BATCH\0"; printf "%s\0" "$@"; printf SUMS; '"$H"' "$@"; printf "\0"; }' sh; }
"#;

/// An argument naming a path as [`PRELUDE`]'s `dec` reads it back: any
/// byte but printable ASCII and the backslash as a `\0ooo` escape of
/// `printf %b`, so every path travels, whatever its bytes.
pub fn escape_arg(p: &[u8]) -> String {
    let mut s = String::with_capacity(p.len());
    for &b in p {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\0{b:03o}"));
        }
    }
    s
}

/// One traversal of the current directory, one tagged record per entry:
/// `D<dir>`, `L<link>\0<target>`, `F<file>`, `X<executable file>`, plus
/// what the arguments add to the expression. Busybox `find` loses
/// `-exec … +` output inside parentheses, hence the chain without them
/// (`! -type f` ends the first file chain so the caller's, for files
/// written since a time, runs for every file). A symlink's target comes
/// from GNU `find -printf` where there is one: `readlink` is a process
/// per symlink, and a root with tens of thousands of them (a pnpm
/// `node_modules`, kept as an untracked output) took minutes to walk on a
/// loaded machine.
const FIND_ENTRIES: &str = r#"if find . -maxdepth 0 -printf '' >/dev/null 2>&1; then
  entries() { find . -type d -exec printf 'D%s\0' {} + -o -type l -printf 'L%p\0%l\n\0' -o -type f -exec printf 'F%s\0' {} + -perm -100 -exec printf 'X%s\0' {} + ! -type f "$@"; }
else
  entries() { find . -type d -exec printf 'D%s\0' {} + -o -type l -exec sh -c 'for p do printf "L%s\0" "$p"; readlink "$p"; printf "\0"; done' sh {} + -o -type f -exec printf 'F%s\0' {} + -perm -100 -exec printf 'X%s\0' {} + ! -type f "$@"; }
fi
"#;

/// Exit code: the synced root is gone (or is not a directory).
pub const EXIT_ROOT_GONE: i32 = 92;
/// Exit code: a path could not be removed.
pub const EXIT_REMOVE: i32 = 96;
pub use super::remote_check::{EXIT_DIGEST, EXIT_EXTRACT, EXIT_MISSING_TOOL, STDIN};

/// `sh -c INSPECT rfs-inspect DEST STAMP`.
pub fn inspect_script() -> String {
    format!(
        r#"{PRELUDE}{FIND_ENTRIES}dest=$1; stamp=$2
cd -P -- "$dest" 2>/dev/null || {{ echo "the synced root $dest is gone from the sandbox" >&2; exit 92; }}
printf 'ROOT\0%s\0' "$PWD"
if [ -f "$stamp" ]; then
  entries -o -type f -newer "$stamp" -exec printf 'N%s\0' {{}} +
else
  printf 'NOSTAMP\0'
  entries
fi
printf 'END\0'
"#
    )
}

/// `sh -c HASH rfs-hash DEST PATH...`: the sha256 of each PATH (relative
/// to DEST, as [`escape_arg`] writes it) that is a regular file, in
/// `BATCH` records; other paths are not reported.
pub fn hash_script() -> String {
    format!(
        r#"{PRELUDE}dest=$1; shift
cd -P -- "$dest" 2>/dev/null || {{ echo "the synced root $dest is gone from the sandbox" >&2; exit 92; }}
printf 'ROOT\0%s\0' "$PWD"
for a do dec "$a"; [ -f "./$p" ] && [ ! -h "./$p" ] && printf '%s\0' "./$p"; done | sums
printf 'END\0'
"#
    )
}

/// `sh -c APPLY rfs-apply ARCHIVE DEST AUX STAMP [R<path>|D<path>|S<path>]...`:
/// ARCHIVE is the uploaded delta tar, `-` (streamed on standard input) or
/// `none`; `R` paths are removed
/// whole, `D` paths are removed when empty (in the order given), all
/// relative to DEST, before the extraction; `S` paths (as [`escape_arg`]
/// writes them) are hashed after it.
pub fn apply_script() -> String {
    format!(
        r#"{PRELUDE}{FIND_ENTRIES}arc=$1; dest=$2; aux=$3; stamp=$4; shift 4
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
if [ "$arc" = - ]; then
  need tee; need mkfifo
  mkfifo "$aux/fifo" || exit 92
  $H <"$aux/fifo" >"$aux/sum" 2>&1 &
  spid=$!
  tee "$aux/fifo" | {{ tar -xmf - -C . 2>"$aux/err" || : >"$aux/tarfail"; cat >/dev/null; }}
  wait "$spid" || {{ head -c 500 "$aux/sum" >&2; exit 94; }}
  if [ -e "$aux/tarfail" ]; then head -c 500 "$aux/err" >&2; exit 93; fi
elif [ "$arc" != none ]; then
  $H "$arc" >"$aux/sum" 2>&1 &
  spid=$!
  if ! tar -xmf "$arc" -C . 2>"$aux/err"; then wait "$spid"; head -c 500 "$aux/err" >&2; exit 93; fi
  wait "$spid" || {{ head -c 500 "$aux/sum" >&2; exit 94; }}
fi
printf 'ROOT\0%s\0' "$PWD"
printf 'ARCHIVE\0'; [ -f "$aux/sum" ] && cut -c1-64 "$aux/sum" | tr -d '\n'; printf '\0'
entries -o -type f -newer "$aux/pre" -exec printf 'N%s\0' {{}} +
for a do case $a in S*) dec "${{a#?}}"; [ -f "./$p" ] && [ ! -h "./$p" ] && printf '%s\0' "./$p" ;; esac; done | sums
printf 'END\0'
touch -d "@$(( $(date +%s) - 1 ))" "$stamp" 2>/dev/null || rm -f -- "$stamp"
rm -rf -- "$aux"
case $arc in none|-) ;; *) rm -f -- "$arc" ;; esac
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

/// The argv tail of [`apply_script`] naming the shipped files it hashes.
pub fn hash_args(files: &[Vec<u8>]) -> Vec<String> {
    files
        .iter()
        .map(|p| format!("S{}", escape_arg(p)))
        .collect()
}

/// Parse [`inspect_script`]'s or [`hash_script`]'s (`with_archive` false)
/// or [`apply_script`]'s (true) report.
pub fn parse_listing(out: &[u8], with_archive: bool) -> Result<Listing, ReportError> {
    let mut f = out.split(|b| *b == 0);
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
    let mut exec = BTreeSet::new();
    let mut files = vec![];
    loop {
        let field = f.next().ok_or(ReportError::Truncated)?;
        match field {
            b"END" => break,
            b"" => return Err(ReportError::Truncated),
            b"NOSTAMP" if !with_archive => l.stamp_ok = false,
            b"BATCH" => {
                let mut names = vec![];
                let sums = loop {
                    match f.next() {
                        Some(p) if p.starts_with(b"./") => names.push(p),
                        Some(s) if s.starts_with(b"SUMS") => break &s[4..],
                        _ => return Err(ReportError::SectionMissing("SUMS")),
                    }
                };
                let mut sums = sums;
                for p in names {
                    let (sha, rest) = parse_sum_line(sums, p)?;
                    sums = rest;
                    l.hashed.insert(rel(p).unwrap_or(p).to_vec(), sha);
                }
                if !sums.is_empty() {
                    return Err(ReportError::ExtraChecksums);
                }
            }
            [b'D', b'.', ..] => {
                if let Some(r) = rel(&field[1..]) {
                    l.entries.entries.insert(r.to_vec(), Entry::Dir);
                }
            }
            [tag @ (b'L' | b'F' | b'X' | b'N'), b'.', b'/', ..] => {
                let p = &field[3..];
                match tag {
                    b'L' => {
                        let mut target = f.next().ok_or(ReportError::LinkTargetMissing)?;
                        if let Some(t) = target.strip_suffix(b"\n") {
                            target = t;
                        }
                        l.entries.entries.insert(
                            p.to_vec(),
                            Entry::Symlink {
                                target: target.to_vec(),
                            },
                        );
                    }
                    b'F' => files.push(p),
                    b'X' => {
                        exec.insert(p);
                    }
                    _ => {
                        l.newer.insert(p.to_vec());
                    }
                }
            }
            other => {
                return Err(ReportError::UnexpectedRecord(
                    String::from_utf8_lossy(&other[..other.len().min(80)]).into_owned(),
                ))
            }
        }
    }
    for p in files {
        let entry = Entry::File {
            exec: exec.contains(p),
            sha256: String::new(),
            size: 0,
        };
        if l.entries.entries.insert(p.to_vec(), entry).is_some() {
            return Err(ReportError::ReportedTwice(
                String::from_utf8_lossy(p).into_owned(),
            ));
        }
    }
    Ok(l)
}

fn expect<'a>(
    name: &'static str,
    f: &mut impl Iterator<Item = &'a [u8]>,
) -> Result<(), ReportError> {
    match f.next() {
        Some(x) if x == name.as_bytes() => Ok(()),
        other => Err(ReportError::UnexpectedSection {
            expected: name,
            found: other.map(|o| String::from_utf8_lossy(o).into_owned()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_inspection_with_odd_names_in_any_order() {
        let r = b"ROOT\0/w\0D.\0N./n\nl\0X./d/x\0F./d/x\0D./d\0L./l\0t\n\0F./n\nl\0END\0";
        let l = parse_listing(r, false).unwrap();
        assert_eq!(l.physical_root, "/w");
        assert!(l.stamp_ok);
        assert_eq!(l.entries.entries.len(), 4);
        assert!(matches!(
            l.entries.entries[&b"d/x"[..]],
            Entry::File { exec: true, .. }
        ));
        assert!(matches!(
            l.entries.entries[&b"n\nl"[..]],
            Entry::File { exec: false, .. }
        ));
        assert!(l.newer.contains(&b"n\nl"[..]));
    }

    #[test]
    fn an_escaped_argument_names_any_path_in_ascii() {
        assert_eq!(escape_arg(b"src/a b.txt"), "src/a b.txt");
        assert_eq!(escape_arg(b"n\nl\\\xff"), "n\\0012l\\0134\\0377");
    }

    #[test]
    fn a_missing_stamp_and_unknown_records_are_reported() {
        let r = b"ROOT\0/w\0NOSTAMP\0D.\0F./a\0END\0";
        assert!(!parse_listing(r, false).unwrap().stamp_ok);
        let r = b"ROOT\0/w\0D.\0Q./a\0END\0";
        assert!(matches!(
            parse_listing(r, false),
            Err(ReportError::UnexpectedRecord(r)) if r == "Q./a"
        ));
    }

    #[test]
    fn a_truncated_report_is_an_error() {
        let r = b"ROOT\0/w\0D.\0F./a\0";
        assert_eq!(parse_listing(r, false).unwrap_err(), ReportError::Truncated);
        let h = "a".repeat(64);
        let mut r = b"ROOT\0/w\0ARCHIVE\0s\0D.\0F./a\0BATCH\0./a\0SUMS".to_vec();
        r.extend_from_slice(format!("{h}  ./a\n").as_bytes());
        r.push(0);
        assert_eq!(parse_listing(&r, true).unwrap_err(), ReportError::Truncated);
        r.extend_from_slice(b"END\0");
        let l = parse_listing(&r, true).unwrap();
        assert_eq!(l.hashed[&b"a"[..]], h);
        assert_eq!(l.archive_sha256, "s");
    }
}

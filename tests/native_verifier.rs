//! The native verifier (`rfs __verify-source`) against the POSIX script it
//! replaces on `local`: the same report for the same archive, hostile
//! archives refused with the extraction exit code and nothing written
//! outside the destination.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rfs::fuzzing::{parse_report, Entry, Manifest, EXIT_DEST_EXISTS, EXIT_EXTRACT, VERIFY_SCRIPT};
use sha2::{Digest, Sha256};

const MTIME: u64 = 1_600_000_000;

fn rfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rfs"))
}

fn run(mut cmd: Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        // The verifier may stop reading (a refusal): a broken pipe is fine.
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// `rfs __verify-source ARCHIVE DEST AUX "" STAMP`.
fn native(archive: &str, dest: &Path, aux: &Path, stamp: &Path, stdin: &[u8]) -> Output {
    let mut cmd = Command::new(rfs_bin());
    cmd.arg("__verify-source")
        .arg(archive)
        .arg(dest)
        .arg(aux)
        .arg("")
        .arg(stamp);
    run(cmd, stdin)
}

/// The POSIX script with the same arguments.
fn posix(dest: &Path, aux: &Path, stamp: &Path, stdin: &[u8]) -> Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", VERIFY_SCRIPT, "rfs-verify", "-"])
        .arg(dest)
        .arg(aux)
        .arg("")
        .arg(stamp)
        .env("LC_ALL", "C");
    run(cmd, stdin)
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_mtime(MTIME);
    h.set_uid(0);
    h.set_gid(0);
    h
}

fn os(b: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(b))
}

/// An archive with every shape the builder writes.
fn odd_archive() -> Vec<u8> {
    let mut t = tar::Builder::new(Vec::new());
    let dir = |t: &mut tar::Builder<Vec<u8>>, name: &[u8]| {
        let mut h = header(tar::EntryType::Directory, 0o755, 0);
        t.append_data(&mut h, os(name), std::io::empty()).unwrap();
    };
    let file = |t: &mut tar::Builder<Vec<u8>>, name: &[u8], mode: u32, data: &[u8]| {
        let mut h = header(tar::EntryType::Regular, mode, data.len() as u64);
        t.append_data(&mut h, os(name), data).unwrap();
    };
    let link = |t: &mut tar::Builder<Vec<u8>>, name: &[u8], target: &[u8]| {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        t.append_link(&mut h, os(name), os(target)).unwrap();
    };
    dir(&mut t, b"d");
    dir(&mut t, b"d/empty");
    dir(&mut t, b"sp ace dir");
    file(&mut t, b"d/x.sh", 0o755, b"#!/bin/sh\necho hi\n");
    file(&mut t, b"new\nline", 0o644, b"newline in the name\n");
    file(&mut t, b"sp ace dir/a b", 0o644, b"spaces\n");
    file(&mut t, b"back\\slash\rcr", 0o755, b"backslash and CR\n");
    file(&mut t, b"\xff\xfe-not-utf8", 0o644, b"latin-1 name\n");
    file(&mut t, b"empty", 0o644, b"");
    let long = format!("d/{}", "l".repeat(150));
    file(&mut t, long.as_bytes(), 0o644, b"a long name\n");
    let big: Vec<u8> = (0..5 * 1024 * 1024 + 123)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    file(&mut t, b"d/big.bin", 0o644, &big);
    link(&mut t, b"to-x", b"d/x.sh");
    link(&mut t, b"d/dangling", b"../nowhere");
    link(&mut t, b"new\nlink", b"target\nwith newline");
    link(
        &mut t,
        b"long-target",
        format!("{}/t", "t".repeat(140)).as_bytes(),
    );
    t.into_inner().unwrap()
}

struct Dirs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        Dirs { _tmp: tmp, root }
    }
    fn p(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// A parsed report: physical root, archive digest, manifest.
struct Parsed {
    physical_root: String,
    archive_sha256: String,
    manifest: Manifest,
}

#[track_caller]
fn ok(out: &Output) -> Parsed {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = parse_report(&out.stdout).unwrap();
    Parsed {
        physical_root: r.physical_root,
        archive_sha256: r.archive_sha256,
        manifest: r.manifest,
    }
}

#[test]
fn the_native_verifier_reports_what_the_posix_script_reports() {
    let d = Dirs::new();
    let archive = odd_archive();
    let n = ok(&native(
        "-",
        &d.p("native"),
        &d.p("aux-n"),
        &d.p("stamp-n"),
        &archive,
    ));
    let s = ok(&posix(
        &d.p("posix"),
        &d.p("aux-s"),
        &d.p("stamp-s"),
        &archive,
    ));
    // The script's digest is the stream's sha256, the native verifier's
    // its tar-entries-sha256; both cover the stream as received.
    assert_eq!(n.archive_sha256, rfs::fuzzing::entries_digest(&archive));
    assert_eq!(s.archive_sha256, hex::encode(Sha256::digest(&archive)));
    assert_eq!(n.physical_root, d.p("native").to_string_lossy());
    assert_eq!(s.physical_root, d.p("posix").to_string_lossy());
    assert_eq!(n.manifest, s.manifest);
    // Everything arrived (directories, files, links, the empty dir).
    assert_eq!(n.manifest.entries.len(), 15, "{:?}", n.manifest.entries);
    assert!(matches!(
        n.manifest.entries[&b"back\\slash\rcr"[..]],
        Entry::File { exec: true, .. }
    ));
    // Files carry the archive's time (a re-sync's stamp is compared with
    // it); the stamp is written like the script's; AUX is gone.
    for (root, stamp, aux) in [
        ("native", "stamp-n", "aux-n"),
        ("posix", "stamp-s", "aux-s"),
    ] {
        let m = std::fs::metadata(d.p(root).join("d/big.bin")).unwrap();
        let mtime = m.modified().unwrap();
        assert_eq!(
            mtime
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
            MTIME,
            "{root}"
        );
        assert!(d.p(stamp).exists(), "{stamp}");
        assert!(!d.p(aux).exists(), "{aux}");
        let x = std::fs::metadata(d.p(root).join("d/x.sh")).unwrap();
        assert_ne!(x.permissions().mode() & 0o100, 0, "{root}");
    }
}

/// The archive given as a file is read (and removed, like the script does);
/// bytes after the archive's end belong to the digest.
#[test]
fn an_archive_file_with_trailing_bytes_is_hashed_whole_and_removed() {
    let d = Dirs::new();
    let mut archive = odd_archive();
    archive.extend_from_slice(&[0u8; 4096]);
    archive.extend_from_slice(b"trailing garbage");
    let file = d.p("upload.tar");
    std::fs::write(&file, &archive).unwrap();
    let n = ok(&native(
        file.to_str().unwrap(),
        &d.p("native"),
        &d.p("aux"),
        &d.p("stamp"),
        b"",
    ));
    assert_eq!(n.archive_sha256, rfs::fuzzing::entries_digest(&archive));
    assert!(!file.exists());
}

#[test]
fn an_existing_destination_is_refused() {
    let d = Dirs::new();
    std::fs::create_dir(d.p("native")).unwrap();
    let out = native("-", &d.p("native"), &d.p("aux"), &d.p("stamp"), b"");
    assert_eq!(out.status.code(), Some(EXIT_DEST_EXISTS));
}

/// One raw entry: `name` written into the header as is (the tar crate's
/// builder would refuse or rewrite hostile names).
fn raw_entry(t: &mut Vec<u8>, name: &[u8], kind: tar::EntryType, link: &[u8], data: &[u8]) {
    let mut h = header(kind, 0o644, data.len() as u64);
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    h.set_cksum();
    t.extend_from_slice(h.as_bytes());
    t.extend_from_slice(data);
    t.resize(t.len().div_ceil(512) * 512, 0);
}

fn finish(mut t: Vec<u8>) -> Vec<u8> {
    t.extend_from_slice(&[0u8; 1024]);
    t
}

#[test]
fn hostile_archives_are_refused_and_write_nothing_outside() {
    let d = Dirs::new();
    let outside = d.p("outside");
    std::fs::create_dir(&outside).unwrap();
    let abs = outside.join("abs");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("absolute", {
            let mut t = Vec::new();
            raw_entry(
                &mut t,
                abs.as_os_str().as_bytes(),
                tar::EntryType::Regular,
                b"",
                b"x",
            );
            finish(t)
        }),
        ("dotdot", {
            let mut t = Vec::new();
            raw_entry(&mut t, b"../outside/up", tar::EntryType::Regular, b"", b"x");
            finish(t)
        }),
        ("dotdot-inside", {
            let mut t = Vec::new();
            raw_entry(
                &mut t,
                b"a/../../outside/up2",
                tar::EntryType::Regular,
                b"",
                b"x",
            );
            finish(t)
        }),
        ("through-symlink", {
            let mut t = Vec::new();
            raw_entry(
                &mut t,
                b"l",
                tar::EntryType::Symlink,
                outside.as_os_str().as_bytes(),
                b"",
            );
            raw_entry(&mut t, b"l/pwned", tar::EntryType::Regular, b"", b"x");
            finish(t)
        }),
        ("symlink-then-overwrite", {
            let mut t = Vec::new();
            let target = outside.join("victim");
            raw_entry(
                &mut t,
                b"v",
                tar::EntryType::Symlink,
                target.as_os_str().as_bytes(),
                b"",
            );
            raw_entry(&mut t, b"v", tar::EntryType::Regular, b"", b"x");
            finish(t)
        }),
        ("hard-link", {
            let mut t = Vec::new();
            raw_entry(
                &mut t,
                b"h",
                tar::EntryType::Link,
                outside.as_os_str().as_bytes(),
                b"",
            );
            finish(t)
        }),
    ];
    for (what, archive) in cases {
        let dest = d.p(&format!("dest-{what}"));
        let out = native(
            "-",
            &dest,
            &d.p(&format!("aux-{what}")),
            &d.p("stamp"),
            &archive,
        );
        assert_eq!(
            out.status.code(),
            Some(EXIT_EXTRACT),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("refusing archive entry"),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{what}: a report after a refusal");
        let leaked: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
        assert!(leaked.is_empty(), "{what}: wrote outside: {leaked:?}");
    }
}

/// A corrupt tar (a header whose checksum does not match) is an extraction
/// failure, not a report.
#[test]
fn a_malformed_archive_is_an_extraction_failure() {
    let d = Dirs::new();
    let mut archive = odd_archive();
    archive[100] ^= 0x01;
    let out = native("-", &d.p("native"), &d.p("aux"), &d.p("stamp"), &archive);
    assert_eq!(out.status.code(), Some(EXIT_EXTRACT));
}

/// `git archive` output (with its pax global header) verifies the same
/// way with both verifiers.
#[test]
fn a_git_archive_stream_verifies_like_with_the_script() {
    let d = Dirs::new();
    let repo = d.p("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    std::fs::write(repo.join("sub/run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        repo.join("sub/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("a.txt", repo.join("link")).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
            .arg(&repo)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "x"]);
    let archive = git(&["archive", "HEAD"]);
    let n = ok(&native(
        "-",
        &d.p("n"),
        &d.p("aux-n"),
        &d.p("st-n"),
        &archive,
    ));
    let s = ok(&posix(&d.p("s"), &d.p("aux-s"), &d.p("st-s"), &archive));
    assert_eq!(n.archive_sha256, rfs::fuzzing::entries_digest(&archive));
    assert_eq!(s.archive_sha256, hex::encode(Sha256::digest(&archive)));
    assert_eq!(n.manifest, s.manifest);
    assert_eq!(n.manifest.entries.len(), 4, "{:?}", n.manifest.entries);
}

//! Caches kept between runs (issue #36): `sandbox(#{ caches: #{ NAME:
//! "~/PATH" } })` mounts a folder rfs keeps per repository and provider
//! read-write under the sandbox's home; its digest is journaled at mount
//! and at the end, the evidence says the run is not reproducible from the
//! commit alone, `rfs cache ls|prune` list and empty caches, and runs
//! sharing a cache take turns (an exclusive lock). Local and docker mount
//! caches; daytona refuses them before anything runs.

mod common;
use common::*;
#[path = "common/unprivileged.rs"]
mod unprivileged;

const WRITE: &str = r#"
sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
step("write", "echo wheel > ~/.cache/pip/w.txt");
"#;

const READ: &str = r#"
sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
let r = step("read", "if [ -e ~/.cache/pip/w.txt ]; then cat ~/.cache/pip/w.txt; else echo absent; fi");
print(`cache holds: ${trimmed(r.stdout)}`);
"#;

fn cache_cmd(rfs: &Rfs, dir: &std::path::Path, args: &[&str]) -> (String, String) {
    let out = rfs.cmd(dir).arg("cache").args(args).output().unwrap();
    assert!(out.status.success(), "rfs cache {args:?}: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

provider_tests! {
    fn a_second_run_sees_what_the_first_wrote_into_its_cache(rfs: &Rfs) {
        let repo = Repo::new();
        let first = rfs.run(repo.path(), WRITE);
        if rfs.prov == Prov::Daytona {
            first.assert_code(3);
            assert!(first.stderr.contains("provider `daytona` cannot mount a cache"), "{}", first.stderr);
            assert!(first.entries("placement").is_empty(), "refused before anything ran");
            return;
        }
        first.assert_code(0);
        let m = &first.entries("cache.mount")[0];
        assert_eq!((m["name"].as_str(), m["path"].as_str(), m["files"].as_u64()), (Some("pip"), Some("~/.cache/pip"), Some(0)));
        let end = &first.entries("cache.end")[0];
        assert_eq!((end["files"].as_u64(), end["bytes"].as_u64(), end["changed"].as_bool()), (Some(1), Some(6), Some(true)));
        // The end is journaled after the sandbox is gone.
        let kinds = first.kinds();
        assert!(kinds.iter().position(|k| k == "cache.end") > kinds.iter().position(|k| k.starts_with("cleanup.")), "{kinds:?}");
        let ev = first.evidence();
        assert!(ev.contains("NOT REPRODUCIBLE from the commit alone") && ev.contains("## Caches"), "{ev}");
        assert_bundle_verifies(rfs, repo.path(), &first.out_dir);

        let second = rfs.run(repo.path(), READ);
        second.assert_code(0);
        assert!(second.stdout.contains("cache holds: wheel"), "{}", second.stdout);
        assert_eq!(second.entries("cache.mount")[0]["sha256"], end["sha256"], "mounted what the first run left");
        assert_eq!(second.entries("cache.end")[0]["changed"], false);

        let (ls, _) = cache_cmd(rfs, repo.path(), &["ls"]);
        let line = ls.lines().find(|l| l.contains(" pip ")).unwrap_or_else(|| panic!("{ls}"));
        assert!(line.starts_with(rfs.prov.name()) && line.contains("1 files") && line.contains("6 bytes"), "{line}");
        let (_, err) = cache_cmd(rfs, repo.path(), &["prune"]);
        assert!(err.contains("emptied 1 cache(s)"), "{err}");
        let (ls, _) = cache_cmd(rfs, repo.path(), &["ls"]);
        assert!(ls.contains("0 files"), "{ls}");
        let third = rfs.run(repo.path(), READ);
        third.assert_code(0);
        assert!(third.stdout.contains("cache holds: absent"), "{}", third.stdout);
    }

    // A cache is this repository's: another repository's run mounts an
    // empty one of the same name. And one left over its size cap
    // (RFS_CACHE_MAX_BYTES) is emptied at the end, the journal saying so.
    fn another_repository_cannot_see_a_cache_and_one_over_its_cap_is_emptied(rfs: &Rfs) {
        let repo = Repo::new();
        if rfs.prov == Prov::Daytona {
            // Daytona mounts no cache: refused before anything runs.
            rfs.run(repo.path(), WRITE).assert_code(3);
            return;
        }
        rfs.run(repo.path(), WRITE).assert_code(0);
        let other = Repo::new();
        let theirs = rfs.run(other.path(), READ);
        theirs.assert_code(0);
        assert!(theirs.stdout.contains("cache holds: absent"), "{}", theirs.stdout);
        let mine = rfs.run(repo.path(), READ);
        assert!(mine.stdout.contains("cache holds: wheel"), "{}", mine.stdout);
        let big = r#"
sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
step("fill", "dd if=/dev/zero of=$HOME/.cache/pip/big bs=1024 count=64 2>/dev/null");
"#;
        let over = rfs.run_with_env(repo.path(), big, &[], &[("RFS_CACHE_MAX_BYTES", "32768")]);
        over.assert_code(0);
        let end = &over.entries("cache.end")[0];
        assert_eq!((end["emptied"].as_bool(), end["max_bytes"].as_u64()), (Some(true), Some(32768)), "{end}");
        assert!(end["bytes"].as_u64().unwrap() > 32768, "{end}");
        let after = rfs.run(repo.path(), READ);
        assert!(after.stdout.contains("cache holds: absent"), "{}", after.stdout);
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn cache_names_and_paths_are_checked_before_anything_runs(rfs: &Rfs) {
        let repo = Repo::new();
        for (caches, why) in [
            (r#"#{ "a/b": "~/.x" }"#, "no path separator"),
            (r#"#{ pip: "/etc" }"#, "does not start with `~/`"),
            (r#"#{ pip: "~/../etc" }"#, "`..` component"),
            (r#"#{ pip: "~" }"#, "does not start with `~/`"),
        ] {
            let out = rfs.run(repo.path(), &format!("sandbox(#{{ caches: {caches} }});\nstep(\"never\", \"echo ran\");\n"));
            out.assert_code(3);
            assert!(out.stderr.contains(why), "{caches}: {}", out.stderr);
            assert!(out.entries("placement").is_empty(), "{caches}");
            assert!(out.entries("cache.mount").is_empty(), "{caches}");
        }
    }

    fn two_runs_sharing_a_cache_take_turns_and_lose_no_update(rfs: &Rfs) {
        if rfs.prov == Prov::Daytona {
            return; // refused (above)
        }
        let repo = Repo::new();
        // A read-modify-write that loses updates when two runs interleave.
        let script = r#"
sandbox(#{ caches: #{ counter: "~/.cache/counter" } });
step("count", "i=0; while [ $i -lt 15 ]; do n=$(cat ~/.cache/counter/n 2>/dev/null || echo 0); sleep 0.05; echo $((n+1)) > ~/.cache/counter/n; i=$((i+1)); done");
"#;
        let (a, a_dir) = rfs.spawn(repo.path(), script);
        let (b, b_dir) = rfs.spawn(repo.path(), script);
        let a = wait_bounded(a, a_dir);
        let b = wait_bounded(b, b_dir);
        a.assert_code(0);
        b.assert_code(0);
        let check = rfs.run(
            repo.path(),
            r#"
sandbox(#{ caches: #{ counter: "~/.cache/counter" } });
print(`n=${trimmed(step("n", "cat ~/.cache/counter/n").stdout)}`);
"#,
        );
        check.assert_code(0);
        assert!(check.stdout.contains("n=30"), "lost an update: {}", check.stdout);
        // One run mounted exactly what the other left.
        let (am, ae) = (&a.entries("cache.mount")[0]["sha256"], &a.entries("cache.end")[0]["sha256"]);
        let (bm, be) = (&b.entries("cache.mount")[0]["sha256"], &b.entries("cache.end")[0]["sha256"]);
        assert!(am == be || bm == ae, "the runs overlapped: {am} {ae} {bm} {be}");
        let waited = a.entries("cache.mount")[0]["waited_ms"].as_u64().unwrap()
            + b.entries("cache.mount")[0]["waited_ms"].as_u64().unwrap();
        assert!(waited > 0, "neither run waited for the other");
    }
}

/// A bundle is anyone's script: `rfs replay` of a run that used a cache
/// is refused before anything runs, so the bundle neither reads nor
/// fills the caches this repository's own runs use.
#[test]
fn a_replayed_bundle_cannot_use_this_repositorys_caches() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let first = rfs.run(repo.path(), WRITE);
    first.assert_code(0);
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let o = rfs
        .cmd(repo.path())
        .arg("replay")
        .arg(&first.out_dir)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("rfs runs");
    let r = finish(o, out_dir);
    r.assert_code(3);
    assert!(
        r.stderr.contains("caches refused in a replay"),
        "{}",
        r.stderr
    );
    assert!(r.entries("cache.mount").is_empty(), "no cache was mounted");
    assert!(
        r.entries("placement").is_empty(),
        "refused before anything ran"
    );
    rfs.assert_no_leftovers();
}

/// A cache is this machine's folder: without the overlay on the
/// sandbox's disk, a step could write past the person's disk limit into
/// it (a 3000 MB write against `disk: "32M"` filled the host's disk).
/// The write stops at the limit, named; the cache keeps at most the
/// limit; a later run finds what was written and can delete it, and the
/// deletion reaches the cache.
#[test]
fn a_step_cannot_fill_this_machines_disk_past_the_disk_limit_through_a_cache() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let fill = rfs.run(
        repo.path(),
        r#"sandbox(#{ disk: "32M", caches: #{ big: "~/.cache/big" } });
let r = step("fill", "dd if=/dev/zero of=$HOME/.cache/big/blob bs=1M count=3000", #{ allow_failure: true });
print(`ok=${r.ok}`);"#,
    );
    fill.assert_code(0);
    assert!(fill.stdout.contains("ok=false"), "{}", fill.stdout);
    assert_eq!(
        fill.entries("step.end")[0]["limit"],
        "disk limit 32 MiB full"
    );
    let end = &fill.entries("cache.end")[0];
    let kept = end["bytes"].as_u64().unwrap();
    assert!(kept > 0 && kept <= 32 << 20, "the cache kept {kept} bytes");

    let clean = rfs.run(
        repo.path(),
        r#"sandbox(#{ caches: #{ big: "~/.cache/big" } });
step("rm", "test -s ~/.cache/big/blob && rm ~/.cache/big/blob && mkdir ~/.cache/big/d && echo x > ~/.cache/big/d/f");"#,
    );
    clean.assert_code(0);
    let end = &clean.entries("cache.end")[0];
    assert_eq!(
        (end["files"].as_u64(), end["bytes"].as_u64()),
        (Some(1), Some(2)),
        "{end}"
    );
    rfs.assert_no_leftovers();
}

/// A clone at `at` of a project whose `origin` is `url`, with one commit
/// of its own.
fn clone_at(at: &std::path::Path, url: &str, content: &str) {
    std::fs::create_dir_all(at).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(at)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["remote", "add", "origin", url]);
    std::fs::write(at.join("README"), content).unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", content]);
}

/// Caches were keyed by the checkout's path: an unrelated repository
/// cloned where another had been (a CI workspace) read what the other
/// wrote (a `sitecustomize.py` in a pip cache runs in its steps). They
/// are keyed by the clone's origin and root commit now; the same project
/// back at that path finds its own cache again.
#[test]
fn an_unrelated_repository_cloned_at_the_same_path_cannot_see_anothers_cache() {
    let rfs = Rfs::new(Prov::Local);
    let ws = tempfile::tempdir().unwrap();
    let at = ws.path().join("workspace");
    clone_at(&at, "file:///nowhere/one.git", "one");
    rfs.run(&at, WRITE).assert_code(0);
    std::fs::rename(&at, ws.path().join("one-aside")).unwrap();
    clone_at(&at, "file:///nowhere/two.git", "two");
    let other = rfs.run(&at, READ);
    other.assert_code(0);
    assert!(
        other.stdout.contains("cache holds: absent"),
        "{}",
        other.stdout
    );
    // Same path, no origin, another root commit: not shared either.
    std::fs::remove_dir_all(&at).unwrap();
    clone_at(&at, "file:///nowhere/one.git", "one, again");
    let same_url = rfs.run(&at, READ);
    assert!(
        same_url.stdout.contains("cache holds: absent"),
        "{}",
        same_url.stdout
    );
    std::fs::remove_dir_all(&at).unwrap();
    std::fs::rename(ws.path().join("one-aside"), &at).unwrap();
    let back = rfs.run(&at, READ);
    assert!(
        back.stdout.contains("cache holds: wheel"),
        "{}",
        back.stdout
    );
    rfs.assert_no_leftovers();
}

/// Issue #43: a Docker container's root is this machine's root in a cache
/// bound into it. A step left a setuid-root static program, a
/// world-writable fifo (a block device it can no longer make) and a world-writable folder there; after
/// the run the cache folder holds none of them (the program kept, its
/// setuid bit dropped; the fifo removed; the folder narrowed), the
/// journal says what was changed, and no other user of this machine can
/// reach the cache at all, even where the state directory is open to
/// them.
#[test]
fn a_docker_cache_brings_no_setuid_program_device_node_or_world_writable_folder_onto_this_machine()
{
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    // A person's state directory (~/.local/state/rfs) is usually open
    // to every user; only the caches' own folders may keep them out.
    std::fs::set_permissions(rfs.state.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let repo = Repo::new();
    let plant = r#"
sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
step("plant", "set -e; c=$HOME/.cache/pip; cp /bin/busybox $c/helper; chmod 4755 $c/helper; if mknod -m 666 $c/disk b 254 0 2>/dev/null; then echo made-a-device; fi; mkfifo -m 666 $c/pipe; mkdir $c/open; chmod 0777 $c/open $c; ls -ln $c");
"#;
    let out = rfs.run(repo.path(), plant);
    out.assert_code(0);
    assert!(
        out.stdout.contains("rwsr-xr-x"),
        "the step made a setuid program: {}",
        out.stdout
    );
    // A device cannot even be made (the container has no CAP_MKNOD,
    // #44); a fifo can, and is what the cleaning removes.
    assert!(!out.stdout.contains("made-a-device"), "{}", out.stdout);
    let dir = std::path::PathBuf::from(out.entries("cache.mount")[0]["dir"].as_str().unwrap());
    let end = &out.entries("cache.end")[0];
    let said = end["cleaned"]
        .as_str()
        .unwrap_or_else(|| panic!("cache.end says nothing cleaned: {end}"));
    assert!(
        said.contains("removed 1 device") && said.contains("setuid"),
        "{said}"
    );
    assert_eq!(end["emptied"], false, "{end}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);

    let mut seen = vec![];
    fn every_entry(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        out.push(d.to_path_buf());
        if std::fs::symlink_metadata(d).unwrap().is_dir() {
            for e in std::fs::read_dir(d).unwrap() {
                every_entry(&e.unwrap().path(), out);
            }
        }
    }
    let mut entries = vec![];
    every_entry(&dir, &mut entries);
    for p in entries {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let (t, mode) = (m.file_type(), m.mode() & 0o7777);
        assert!(
            !(t.is_block_device() || t.is_char_device() || t.is_fifo() || t.is_socket()),
            "a special file reached this machine: {}",
            p.display()
        );
        assert_eq!(
            mode & 0o6000,
            0,
            "setuid/setgid kept: {} {mode:o}",
            p.display()
        );
        assert_eq!(mode & 0o002, 0, "world-writable: {} {mode:o}", p.display());
        seen.push(p);
    }
    let helper = dir.join("helper");
    assert!(
        seen.contains(&helper) && seen.contains(&dir.join("open")),
        "{seen:?}"
    );
    assert!(!dir.join("disk").exists() && std::fs::symlink_metadata(dir.join("disk")).is_err());

    // No other user reaches the cache: the caches root and its provider
    // and repository folders are rfs's user's alone.
    let caches = rfs.state.path().join("caches");
    for p in [
        caches.clone(),
        caches.join("docker"),
        dir.parent().unwrap().to_path_buf(),
    ] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700, "{}", p.display());
        // SAFETY: geteuid cannot fail.
        assert_eq!(m.uid(), unsafe { libc::geteuid() }, "{}", p.display());
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let nobody = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            // Through a shell: setpriv itself may open the program it runs
            // before it gives up root.
            .args(["/bin/sh", "-c", "exec \"$0\" true"])
            .arg(&helper)
            .output()
            .unwrap();
        assert!(
            !nobody.status.success()
                && String::from_utf8_lossy(&nobody.stderr).contains("Permission denied"),
            "an unprivileged user ran the cache's program: {nobody:?}"
        );
        let listed = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                "ls",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            !listed.status.success(),
            "an unprivileged user listed the cache: {listed:?}"
        );
    }
    // A run killed before its end never cleaned its cache: what it left
    // (here put there directly) is cleaned before the next sandbox sees it.
    std::fs::copy(&helper, dir.join("left")).unwrap();
    std::fs::set_permissions(dir.join("left"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    // The next run still finds what the first left, less what could not
    // be kept.
    let again = rfs.run(
        repo.path(),
        r#"sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
let r = step("look", "ls ~/.cache/pip | sort | tr '\n' ' '; ls -l ~/.cache/pip/left");
print(`cache holds: ${trimmed(r.stdout)}`);"#,
    );
    again.assert_code(0);
    assert!(
        again.stdout.contains("cache holds: helper left open"),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("-rwxr-xr-x") && !again.stdout.contains("rws"),
        "the sandbox saw a setuid program left in its cache: {}",
        again.stdout
    );
    assert!(
        again.entries("cache.end")[0].get("cleaned").is_none(),
        "nothing more to clean"
    );
    rfs.assert_no_leftovers();
}

/// Where rfs is not root, `local` binds a cache as it is (there is no
/// sandbox disk to hold an overlay): what the sandbox left there is
/// cleaned after it as on docker — a setuid program, a world-writable
/// folder and a fifo do not outlive it.
#[test]
fn a_local_cache_bound_as_it_is_keeps_no_setuid_program_fifo_or_world_writable_folder() {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = unprivileged::run_unprivileged(
        &rfs,
        repo.path(),
        r#"sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
step("plant", "set -e; c=$HOME/.cache/pip; echo x > $c/helper; chmod 4755 $c/helper; mkdir $c/open; chmod 0777 $c/open; mkfifo $c/fifo; ls -l $c");"#,
        &[],
    );
    out.assert_code(0);
    assert!(
        out.stdout.contains("rwsr-xr-x"),
        "the step made a setuid program: {}",
        out.stdout
    );
    let end = &out.entries("cache.end")[0];
    let said = end["cleaned"]
        .as_str()
        .unwrap_or_else(|| panic!("cache.end says nothing cleaned: {end}"));
    assert!(
        said.contains("removed 1 device") && said.contains("setuid"),
        "{said}"
    );
    let dir = std::path::PathBuf::from(out.entries("cache.mount")[0]["dir"].as_str().unwrap());
    let meta = |p: &str| std::fs::symlink_metadata(dir.join(p)).unwrap();
    let mode = |p: &str| meta(p).mode() & 0o7777;
    // Everything in it is rfs's user's (the sandbox's root is that user).
    for p in ["helper", "open"] {
        assert_eq!(meta(p).uid(), unprivileged::unprivileged_uid(), "{p}");
    }
    assert_eq!(mode("helper"), 0o755);
    assert_eq!(mode("open") & 0o002, 0, "{:o}", mode("open"));
    assert!(std::fs::symlink_metadata(dir.join("fifo")).map_or(true, |m| !m.file_type().is_fifo()));
}

/// A cache of a million empty files counted as 0 bytes against its cap
/// (and took 52 s to tear down and 12 s to digest on every later run).
/// Each entry is charged a 4 KiB block now: a cache of many empty files
/// over the cap is emptied at the end, and `cache.end` says its entries.
#[test]
fn a_cache_of_many_empty_files_is_charged_a_block_each_and_emptied_over_its_cap() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let many = r#"
sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
step("fill", "cd ~/.cache/pip && seq 1 2000 | xargs touch");
"#;
    let out = rfs.run_with_env(
        repo.path(),
        many,
        &[],
        &[("RFS_CACHE_MAX_BYTES", "4000000")],
    );
    out.assert_code(0);
    let end = &out.entries("cache.end")[0];
    assert_eq!(end["bytes"].as_u64(), Some(0), "{end}");
    assert_eq!(end["entries"].as_u64(), Some(2000), "{end}");
    assert_eq!(end["emptied"].as_bool(), Some(true), "{end}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    let after = rfs.run(repo.path(), READ);
    assert!(
        after.stdout.contains("cache holds: absent"),
        "{}",
        after.stdout
    );
    rfs.assert_no_leftovers();
}

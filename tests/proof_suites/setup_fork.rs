//! Setup once, fork per proof (#36): `rfs test --setup` / `rfs.toml`'s
//! `setup` runs once, every proof starts from a fork of its checkpoint
//! in its own sandbox, the link is in each proof's evidence and checked
//! by `rfs verify`, and the checkpoint is gone at the end — on every
//! provider.

use super::*;

/// The setup: syncs the commit, installs "dependencies" into the synced
/// tree and the home, ends with an explicit checkpoint.
const SETUP: &str = r#"
sync_source();
step("install", "mkdir -p deps && echo installed > deps/marker && echo from-setup > $HOME/.setup-home");
checkpoint("deps");
"#;

/// A proof: sees the setup's writes, none of another proof's, then
/// writes its own in the tree, the home and /tmp.
fn proof(n: &str) -> String {
    format!(
        r#"
sync_source();
let r = step("see", "cat deps/marker $HOME/.setup-home; ls own-* $HOME/own-* /tmp/own-* 2>/dev/null | wc -l");
assert(r.stdout.contains("installed") && r.stdout.contains("from-setup"), "the setup's writes: " + r.stdout);
assert(r.stdout.trimmed().ends_with("0"), "another proof's writes: " + r.stdout);
step("write", "echo {n} > own-{n} && echo {n} > $HOME/own-{n} && echo {n} > /tmp/own-{n}");
"#
    )
}

fn fork_repo() -> Repo {
    let repo = Repo::new();
    repo.write("proofs/_setup.rhai", SETUP);
    for n in ["a", "b", "c"] {
        repo.write(&format!("proofs/{n}.rhai"), &proof(n));
    }
    repo.commit("suite with a setup");
    repo
}

fn journal(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn facts<'a>(j: &'a [Value], kind: &str) -> Vec<&'a Value> {
    j.iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| &e["payload"])
        .collect()
}

provider_tests! {
    fn setup_runs_once_and_every_proof_forks_its_checkpoint_without_seeing_the_others(rfs: &Rfs) {
        let repo = fork_repo();
        let s = rfs_test(rfs, repo.path(), &["--setup", "proofs/_setup.rhai", "--jobs", "3"]);
        assert_eq!(s.code, 0, "{}", s.stderr);
        assert_eq!(s.verdicts().len(), 3, "the setup is not a proof: {:?}", s.verdicts());
        // Once: one setup run, one checkpoint, named by every proof.
        let ix = s.index();
        let setup = &ix["setup"];
        let setup_dir = PathBuf::from(setup["out_dir"].as_str().unwrap());
        let sj = journal(&setup_dir);
        let made = facts(&sj, "checkpoint");
        assert_eq!(made.len(), 1, "{sj:?}");
        let cp = made[0]["checkpoint_id"].as_str().unwrap().to_owned();
        assert_eq!(setup["checkpoint"], cp.as_str());
        assert_eq!(made[0]["name"], "deps");
        assert_eq!(made[0]["implicit"], false);
        assert!(made[0]["commit"].is_string(), "the pin in force: {:?}", made[0]);
        let setup_run = setup["run_id"].as_str().unwrap();
        for n in ["a", "b", "c"] {
            let b = s.bundle(&format!("proofs/{n}.rhai"));
            let j = journal(&b);
            let f = facts(&j, "placement.forked");
            assert_eq!(f.len(), 1, "{j:?}");
            assert_eq!(f[0]["checkpoint_id"], cp.as_str());
            assert_eq!(f[0]["setup_run_id"], setup_run);
            assert_eq!(f[0]["setup_journal_head"], made[0]["journal_head"]);
            // The source came from the checkpoint: nothing shipped again.
            assert_eq!(facts(&j, "source.from_checkpoint").len(), 1, "{j:?}");
            assert!(facts(&j, "source.verify").is_empty(), "re-shipped: {j:?}");
            let ev = std::fs::read_to_string(b.join("EVIDENCE.md")).unwrap();
            assert!(ev.contains(&format!("started from: checkpoint `{cp}` of setup run `{setup_run}`")), "{ev}");
            assert_bundle_verifies(rfs, repo.path(), &b);
        }
        let md = std::fs::read_to_string(s.dir.join("index.md")).unwrap();
        assert!(md.contains("Setup `proofs/_setup.rhai`") && md.contains(setup_run), "{md}");
        let html = std::fs::read_to_string(s.dir.join("index.html")).unwrap();
        assert!(html.contains("id=\"setup-run\"") && html.contains(setup_run), "{html}");
        // Removed at the end, verified, and gone in the provider's
        // inventory (on Daytona's VM classes the setup's sandbox too: the
        // checkpoint is its fork, so it is destroyed after it).
        for r in setup["removed"].as_array().unwrap() {
            assert_eq!(r["verified"], true, "{setup}");
        }
        assert!(!rfs.checkpoint_exists(&cp), "checkpoint {cp} left behind");
        rfs.assert_no_leftovers();
    }

    fn a_forged_checkpoint_link_fails_verify(rfs: &Rfs) {
        let repo = fork_repo();
        let one = rfs_test(rfs, repo.path(), &["--setup", "proofs/_setup.rhai", "-k", "a.rhai"]);
        assert_eq!(one.code, 0, "{}", one.stderr);
        let two = rfs_test(rfs, repo.path(), &["--setup", "proofs/_setup.rhai", "-k", "a.rhai"]);
        assert_eq!(two.code, 0, "{}", two.stderr);
        let b = one.bundle("proofs/a.rhai");
        // Another (valid, ended) setup run's journal in place of its own.
        std::fs::copy(
            two.bundle("proofs/a.rhai").join("setup/journal.jsonl"),
            b.join("setup/journal.jsonl"),
        )
        .unwrap();
        let (ok, text) = rfs_verify(rfs, repo.path(), &b);
        assert!(!ok && text.contains("checkpoint link"), "{text}");
        // No setup journal at all.
        std::fs::remove_dir_all(b.join("setup")).unwrap();
        let (ok, text) = rfs_verify(rfs, repo.path(), &b);
        assert!(!ok && text.contains("checkpoint link"), "{text}");
        rfs.assert_no_leftovers();
    }

    // A setup needs the network (to install), its proofs must not have
    // it: a proof asking `network: false` gets only a loopback in its
    // fork. On daytona a fork kept its checkpoint's network, so such a
    // proof was refused ("the server ignored the field"); the fork is now
    // given the proof's network (`POST /sandbox/{id}/network-settings`)
    // and checked as a created sandbox is.
    fn a_proof_forked_from_a_setup_with_a_network_gets_its_own_network_false(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("proofs/_setup.rhai", "sync_source();\nstep(\"install\", \"echo installed > marker\");\ncheckpoint(\"deps\");\n");
        repo.write(
            "proofs/offline.rhai",
            r#"sandbox(#{ network: false });
sync_source();
let r = step("ifaces", "cat marker; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
assert(r.stdout == "installed\nlo\n", "interfaces: " + r.stdout);
"#,
        );
        repo.commit("a networked setup, an offline proof");
        let s = rfs_test(rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
        assert_eq!(s.code, 0, "{}", s.stderr);
        let j = journal(&s.bundle("proofs/offline.rhai"));
        assert_eq!(facts(&j, "placement.forked").len(), 1, "{j:?}");
        rfs.assert_no_leftovers();
    }
}

/// The suites above on Daytona's `linux-vm` class, which Daytona forks
/// (the default snapshots' `container` class it does not: there the
/// checkpoint is a snapshot of the sandbox; `provider_tests!`'s
/// `daytona::` runs are that class).
mod daytona_vm {
    macro_rules! on_vm {
        ($($name:ident)*) => {$(
            #[test]
            fn $name() {
                let Some(rfs) = super::Rfs::daytona_vm() else { return };
                super::$name(&rfs);
                rfs.finish();
            }
        )*};
    }
    on_vm! {
        setup_runs_once_and_every_proof_forks_its_checkpoint_without_seeing_the_others
        a_forged_checkpoint_link_fails_verify
        a_proof_forked_from_a_setup_with_a_network_gets_its_own_network_false
    }
}

/// A setup that fails: no proof runs, each says why, the suite fails
/// with the setup's exit, and the checkpoint it made before failing is
/// removed (verified gone).
#[test]
fn a_failing_setup_fails_the_suite_and_no_proof_runs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        (
            "_setup.rhai",
            "checkpoint(\"half\");\nstep(\"install\", \"echo broken; exit 3\");",
        ),
        ("a.rhai", r#"step("x", "true");"#),
        ("b.rhai", r#"step("x", "true");"#),
    ]);
    let s = rfs_test(&rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
    assert_eq!(s.code, 1, "{}", s.stderr);
    let ix = s.index();
    assert_eq!(
        ix["not_run"],
        serde_json::json!(["proofs/a.rhai", "proofs/b.rhai"])
    );
    assert_eq!(ix["proofs"], serde_json::json!([]));
    assert!(s.stderr.contains("SETUP FAIL"), "{}", s.stderr);
    let md = std::fs::read_to_string(s.dir.join("index.md")).unwrap();
    assert!(
        md.contains("**FAILED**") && md.contains("No proof ran"),
        "{md}"
    );
    assert_eq!(ix["setup"]["removed"][0]["verified"], true, "{ix}");
    let left: Vec<_> = std::fs::read_dir(rfs.state.path().join("local/checkpoints"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    rfs.assert_no_leftovers();
}

/// `rfs.toml`'s `setup` names the setup (implicit checkpoint at its
/// end); a committed value that leaves the repository or goes through a
/// link is refused before anything runs; a proof asking another commit
/// than the checkpoint's is refused, never served the checkpoint's tree.
#[test]
fn rfs_toml_names_the_setup_validated_and_another_commit_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let first = repo.git(&["rev-parse", "HEAD"]);
    repo.write(
        "proofs/_setup.rhai",
        "sync_source();\nstep(\"s\", \"echo s > s.txt\");",
    );
    repo.write(
        "proofs/same.rhai",
        r#"sync_source(); step("x", "cat s.txt");"#,
    );
    repo.write(
        "proofs/other.rhai",
        &format!("sync_source(#{{ rev: \"{first}\" }}); step(\"x\", \"true\");"),
    );
    repo.write("rfs.toml", "setup = \"proofs/_setup.rhai\"\n");
    repo.commit("setup in rfs.toml");
    let s = rfs_test(&rfs, repo.path(), &[]);
    assert_eq!(s.code, 3, "{}", s.stderr);
    assert_eq!(
        s.verdicts(),
        [
            ("proofs/other.rhai".to_owned(), "refused".to_owned()),
            ("proofs/same.rhai".into(), "passed".into())
        ]
    );
    let sj = journal(Path::new(s.index()["setup"]["out_dir"].as_str().unwrap()));
    assert_eq!(facts(&sj, "checkpoint")[0]["implicit"], true);
    let j = journal(&s.bundle("proofs/other.rhai"));
    let refused = facts(&j, "source.refused");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("binds the checkpoint's source"),
        "{refused:?}"
    );
    // A proof that started from a checkpoint is not replayed alone.
    let replay = rfs
        .cmd(repo.path())
        .arg("replay")
        .arg(s.bundle("proofs/same.rhai"))
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), Some(3));
    let err = String::from_utf8_lossy(&replay.stderr);
    assert!(
        err.contains("a replay of the proof alone cannot recreate"),
        "{err}"
    );
    for bad in ["../outside.rhai", "/etc/passwd"] {
        repo.write("rfs.toml", &format!("setup = {bad:?}\n"));
        let s = rfs_test(&rfs, repo.path(), &[]);
        assert_eq!(s.code, 2, "{}", s.stderr);
        assert!(
            s.stderr.contains("refused") && s.stderr.contains("setup"),
            "{}",
            s.stderr
        );
    }
    std::os::unix::fs::symlink("/etc/hostname", repo.path().join("proofs/link.rhai")).unwrap();
    repo.write("rfs.toml", "setup = \"proofs/link.rhai\"\n");
    let s = rfs_test(&rfs, repo.path(), &[]);
    assert_eq!(s.code, 2, "{}", s.stderr);
    assert!(s.stderr.contains("symlink"), "{}", s.stderr);
    rfs.assert_no_leftovers();
}

/// The hostile setup of the checkpoint race (#43, finding 1): a folder
/// `victim` holding `secret`, a link `evil` to a folder of this machine,
/// and a watcher that swaps the two (`renameat2(RENAME_EXCHANGE)`) the
/// moment anything on the host opens `victim` — as `cp -a`, having
/// listed `victim`, then copied `victim/secret` by path through the link
/// (2,000 files before it give the watcher the time to swap).
const RACE_WATCHER: &str = r#"
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
home = os.environ["HOME"]
fd = libc.inotify_init()
libc.inotify_add_watch(fd, home.encode(), 0x20)  # IN_OPEN
open(home + "/.watching", "w").close()
while True:
    buf = os.read(fd, 65536)
    i = 0
    while i < len(buf):
        _, _, _, n = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + n].rstrip(b"\0")
        i += 16 + n
        if name == b"victim":
            libc.renameat2(-100, (home + "/victim").encode(), -100, (home + "/evil").encode(), 2)
"#;

/// A checkpoint's host copy followed a link a still-running process of
/// the setup swapped in while `cp -a` copied: every proof forked from it
/// read a file of this machine the sandbox could not. The copy is now
/// made by descriptor beneath the home; whatever the watcher swaps, a
/// fork sees the sandbox's own file or nothing, never the host's.
#[test]
fn a_checkpoint_copy_cannot_be_raced_into_host_files() {
    let rfs = Rfs::new(Prov::Local);
    let secret = tempfile::tempdir().unwrap();
    let marker = format!("HOST-SECRET-{}", uuid_like());
    // The host folder holds the names `victim` does, so that a copy
    // following the swapped link finds each of them and succeeds.
    for i in 1000..3000 {
        std::fs::write(secret.path().join(format!("a{i}")), "").unwrap();
    }
    std::fs::write(secret.path().join("secret"), &marker).unwrap();
    let repo = Repo::new();
    repo.write("w.py", RACE_WATCHER);
    repo.write(
        "proofs/_setup.rhai",
        &format!(
            r#"
sync_source();
step("plant", "mkdir -p $HOME/victim && for i in $(seq 1000 2999); do : > $HOME/victim/a$i; done && echo planted > $HOME/victim/secret && ln -s {} $HOME/evil");
spawn("watch", "exec python3 w.py");
step("watching", "for i in $(seq 1 200); do [ -e $HOME/.watching ] && exit 0; sleep 0.05; done; exit 1");
checkpoint("raced");
"#,
            secret.path().display()
        ),
    );
    repo.write(
        "proofs/read.rhai",
        r#"
let r = step("read", "cat $HOME/victim/secret $HOME/evil/secret 2>&1; true");
print(r.stdout);
"#,
    );
    repo.commit("a hostile setup");
    for _ in 0..3 {
        let s = rfs_test(&rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
        let seen = format!("{}{}", s.stdout, s.stderr);
        let mut logs = String::new();
        if let Ok(ix) = std::panic::catch_unwind(|| s.bundle("proofs/read.rhai")) {
            for f in files_under(&ix) {
                logs.push_str(&String::from_utf8_lossy(
                    &std::fs::read(f).unwrap_or_default(),
                ));
            }
        }
        assert!(
            !seen.contains(&marker) && !logs.contains(&marker),
            "a fork read this machine's file through the checkpoint: {seen}"
        );
        // Either the copy failed closed, saying the tree changed under
        // it, or the proof ran on the sandbox's own files.
        assert!(
            s.code == 0 || seen.contains("changed while rfs read it"),
            "{seen}"
        );
    }
    rfs.assert_no_leftovers();
}

/// A setup planted `~/.cache -> <a folder of this machine>`; a proof's
/// cache under `~/.cache` made rfs (as root, by path) create the folder
/// on the host while the journal said the cache was mounted. The mount
/// point is now created by descriptor beneath the fork's home: the link
/// is refused, named, and nothing is created outside.
#[test]
fn a_setups_symlink_cannot_make_a_proofs_cache_mount_create_host_folders() {
    let rfs = Rfs::new(Prov::Local);
    let host = tempfile::tempdir().unwrap();
    let target = host.path().join("made-by-rfs");
    let repo = Repo::new();
    repo.write(
        "proofs/_setup.rhai",
        &format!(
            "step(\"plant\", \"ln -s {} $HOME/.cache\");\ncheckpoint(\"planted\");\n",
            target.display()
        ),
    );
    repo.write(
        "proofs/cache.rhai",
        "sandbox(#{ caches: #{ pip: \"~/.cache/pip\" } });\nstep(\"use\", \"ls ~/.cache/pip\");\n",
    );
    repo.commit("a setup planting a link");
    let s = rfs_test(&rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
    assert_ne!(s.code, 0, "{}", s.stderr);
    let seen = format!("{}{}", s.stdout, s.stderr);
    assert!(
        seen.contains(".cache is a symbolic link"),
        "the refusal names the link: {seen}"
    );
    assert!(
        !target.exists(),
        "rfs created a folder on the host through the link"
    );
    rfs.assert_no_leftovers();
}

/// A proof forked from a setup that used a cache did not say NOT
/// REPRODUCIBLE in its own evidence, though its sandbox held what the
/// cache brought (#46 item 7). Its `placement.forked` names the setup's
/// cache (checked against the setup's journal by `rfs verify`), and its
/// EVIDENCE.md, report.html and the suite's index say NOT REPRODUCIBLE,
/// naming it.
#[test]
fn a_proof_forked_from_a_setup_that_used_a_cache_says_not_reproducible() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "proofs/_setup.rhai",
        "sandbox(#{ caches: #{ pip: \"~/.cache/pip\" } });\n\
         step(\"install\", \"echo wheel > ~/.cache/pip/w.txt && cp ~/.cache/pip/w.txt ~/installed\");\n\
         checkpoint(\"deps\");\n",
    );
    repo.write("proofs/uses.rhai", "step(\"use\", \"cat ~/installed\");\n");
    repo.commit("a setup using a cache");
    let s = rfs_test(&rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    let setup_dir = PathBuf::from(s.index()["setup"]["out_dir"].as_str().unwrap());
    let mount = facts(&journal(&setup_dir), "cache.mount")[0].clone();
    let b = s.bundle("proofs/uses.rhai");
    let j = journal(&b);
    let forked = facts(&j, "placement.forked")[0].clone();
    assert_eq!(
        forked["setup_caches"],
        serde_json::json!([{ "name": "pip", "path": "~/.cache/pip", "sha256": mount["sha256"] }]),
        "{forked}"
    );
    assert!(
        facts(&j, "cache.mount").is_empty(),
        "the proof mounted no cache itself"
    );
    let ev = std::fs::read_to_string(b.join("EVIDENCE.md")).unwrap();
    let banner = ev
        .lines()
        .find(|l| l.starts_with("> **NOT REPRODUCIBLE from the commit alone"))
        .unwrap_or_else(|| panic!("no NOT REPRODUCIBLE in {ev}"));
    assert!(banner.contains("pip"), "names the cache: {banner}");
    let html = std::fs::read_to_string(b.join("report.html")).unwrap();
    assert!(
        html.contains("<strong>NOT REPRODUCIBLE from the commit alone: this run&#39;s sandbox started from checkpoint")
            && html.contains("the cache pip at ~/.cache/pip (sha256 "),
        "{html}"
    );
    let ix = s.index();
    assert_eq!(ix["reproducible"], false, "{ix}");
    assert_eq!(
        ix["not_reproducible"],
        serde_json::json!(["proofs/uses.rhai"])
    );
    // The fork's caches are held to the setup's journal by `rfs verify`
    // (checkpoint_link: a_fork_naming_other_caches_than_its_setups_is_a_forged_link).
    let (ok, text) = rfs_verify(&rfs, repo.path(), &b);
    assert!(ok, "{text}");
    // Dropping them from a re-chained journal does not verify.
    let forged: String = std::fs::read_to_string(b.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "placement.forked" {
                v["payload"].as_object_mut().unwrap().remove("setup_caches");
            }
            serde_json::to_string(&v).unwrap() + "\n"
        })
        .collect();
    std::fs::write(b.join("journal.jsonl"), forged).unwrap();
    rechain(&b.join("journal.jsonl"));
    let (ok, text) = rfs_verify(&rfs, repo.path(), &b);
    assert!(
        !ok && text.contains("the fork names the caches [] as mounted by the setup"),
        "{text}"
    );
    rfs.assert_no_leftovers();
}

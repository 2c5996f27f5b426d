//! `sync_source()` on every provider: exactly the committed tree arrives,
//! verified; every fail-closed rule refuses before anything runs and
//! leaves no sandbox behind.

mod common;
use common::*;

/// A script whose step would leave a marker on the host if it ran
/// (meaningful for `local`; for every provider the journal must show no
/// step attempt).
fn marker_script(marker: &std::path::Path, sync: &str) -> String {
    format!(
        "{sync}\nstep(\"side-effect\", \"touch {}\");\n",
        marker.display()
    )
}

#[track_caller]
fn assert_refused_nothing_ran(rfs: &Rfs, out: &RunOut, marker: &std::path::Path, needle: &str) {
    out.assert_code(3);
    assert!(
        out.stderr.contains(needle),
        "expected {needle:?} in:\n{}",
        out.stderr
    );
    assert!(
        !marker.exists(),
        "the step ran although the run was refused"
    );
    assert!(
        out.entries("step.attempt").is_empty(),
        "a step attempt was journaled"
    );
    assert_eq!(out.entries("run.end")[0]["outcome"], "refused");
    rfs.assert_no_leftovers();
}

/// Git writes its object files read-only; a test that damages one first
/// makes it writable.
fn make_writable(path: &std::path::Path) {
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(path, perms).unwrap();
}

/// `sync_source()` in `repo` is refused with `needle`, and the step after
/// it never runs.
fn assert_sync_refused(rfs: &Rfs, repo: &Repo, needle: &str) {
    let marker = tempfile::tempdir().unwrap().keep().join("RAN");
    let out = rfs.run(repo.path(), &marker_script(&marker, "sync_source();"));
    assert_refused_nothing_ran(rfs, &out, &marker, needle);
}

provider_tests! {
    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn not_a_git_repository_refuses_before_provisioning(rfs: &Rfs) {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("RAN");
        let out = rfs.run(dir.path(), &marker_script(&marker, ""));
        assert_refused_nothing_ran(rfs, &out, &marker, "is not inside a git repository");
        assert!(out.entries("placement").is_empty(), "no sandbox may be provisioned");
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn repository_without_commits_refuses_before_provisioning(rfs: &Rfs) {
        let repo = Repo::empty();
        let marker = repo.path().join("../RAN-empty");
        let out = rfs.run(repo.path(), &marker_script(&marker, "sync_source();"));
        assert_refused_nothing_ran(rfs, &out, &marker, "has no commits yet");
        assert!(out.entries("placement").is_empty());
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn dirty_tracked_file_refuses_naming_it(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("reproducer-marker.txt", "changed\n");
        let marker = tempfile::tempdir().unwrap().keep().join("RAN");
        let out = rfs.run(repo.path(), &marker_script(&marker, "sync_source();"));
        assert_refused_nothing_ran(rfs, &out, &marker, "reproducer-marker.txt");
        assert!(out.stderr.contains("allow_dirty"), "{}", out.stderr);
        assert!(out.entries("placement").is_empty());
    }

    fn untracked_file_refuses_but_ignored_files_do_not(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write(".gitignore", "build/\n");
        repo.commit("ignore");
        repo.write("build/out.o", "ignored");
        repo.write("notes.txt", "untracked");
        let marker = tempfile::tempdir().unwrap().keep().join("RAN");
        let out = rfs.run(repo.path(), &marker_script(&marker, "sync_source();"));
        assert_refused_nothing_ran(rfs, &out, &marker, "notes.txt");
        assert!(!out.stderr.contains("build/out.o"));
        std::fs::remove_file(repo.path().join("notes.txt")).unwrap();
        let ok = rfs.run(repo.path(), "sync_source(); step(\"ls\", \"test ! -e build\");");
        ok.assert_code(0);
        rfs.assert_no_leftovers();
    }

    fn allow_dirty_ships_the_committed_tree_and_journals_the_paths(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("reproducer-marker.txt", "uncommitted\n");
        repo.write("extra.txt", "untracked");
        let out = rfs.run(repo.path(), r#"
            let src = sync_source(#{ allow_dirty: true });
            let r = step("cat", "cat reproducer-marker.txt; test ! -e extra.txt && echo no-extra");
            assert(r.stdout == "marker\nno-extra\n", r.stdout);
        "#);
        out.assert_code(0);
        let resolved = &out.entries("source.resolved")[0];
        let dirty: Vec<&str> = resolved["dirty_paths_not_shipped"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(dirty, ["extra.txt", "reproducer-marker.txt"]);
        rfs.assert_no_leftovers();
    }

    #[not_under_gvisor = "its evidence is not under the state directory, where the gVisor pass checks every placement"]
    fn run_output_inside_the_repository_does_not_make_the_next_run_dirty(rfs: &Rfs) {
        let repo = Repo::new();
        let (script, _) = rfs.prepare("sync_source(); step(\"x\", \"true\");");
        for n in 0..2 {
            let out_dir = repo.path().join(format!(".rfs/run{n}"));
            let out = rfs.cmd(repo.path()).arg("run").arg(&script).arg("--out").arg(&out_dir).output().unwrap();
            let o = finish(out, out_dir);
            o.assert_code(0);
        }
        rfs.assert_no_leftovers();
    }

    fn cwd_escapes_are_refused_before_anything_runs(rfs: &Rfs) {
        let repo = Repo::new();
        repo.symlink("to-etc", "/etc");
        repo.symlink("to-parent", "..");
        repo.symlink("sub/inner", "../..");
        repo.write("sub/f", "");
        repo.commit("links");
        let tmp = tempfile::tempdir().unwrap();
        for (cwd, needle) in [
            ("..", "escapes the synced source root"),
            ("/etc", "is absolute"),
            ("to-etc", "leaves the synced source root"),
            ("to-parent", "escapes the synced source root"),
            ("sub/inner/x", "escapes the synced source root"),
            ("sub/f", "not a directory"),
        ] {
            let marker = tmp.path().join(format!("RAN-{}", cwd.replace('/', "_")));
            let script = format!(
                "sync_source();\nstep(\"escape\", \"touch {}\", #{{ cwd: {cwd:?} }});\n",
                marker.display()
            );
            let out = rfs.run(repo.path(), &script);
            assert_refused_nothing_ran(rfs, &out, &marker, needle);
            assert!(out.stderr.contains("refused before running anything"), "{}", out.stderr);
        }
    }

    fn odd_names_symlinks_modes_and_empty_files_survive(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("with space/file name.txt", "spaces\n");
        repo.write("ünïcødé/日本語.txt", "unicode\n");
        repo.write_bytes("new\nline.txt", b"newline in name\n");
        repo.write("-leading-dash", "dash\n");
        repo.write("back\\slash", "backslash\n");
        repo.write("empty", "");
        repo.write("bin/run.sh", "#!/bin/sh\necho executable\n");
        repo.chmod_x("bin/run.sh");
        repo.symlink("link-to-file", "with space/file name.txt");
        repo.symlink("link-dir", "bin");
        repo.symlink("dangling", "does/not/exist");
        repo.write("a/b/c/d/e/deep.txt", "deep\n");
        repo.write(&format!("{}/long.txt", "x".repeat(120)), "long path\n");
        repo.commit("odd names");
        let files = repo.git(&["ls-files", "-z"]).split('\0').filter(|s| !s.is_empty()).count();
        let out = rfs.run(repo.path(), r#"
            let src = sync_source();
            let r = step("check", `cat 'with space/file name.txt' 'ünïcødé/日本語.txt' -- -leading-dash 'back\slash'; test -f 'new
line.txt' && echo nl-ok; test -s empty || echo empty-ok; ./bin/run.sh; test -x bin/run.sh && echo x-ok; test ! -x empty && echo nx-ok; test -L link-to-file && cat link-to-file; test -L dangling && echo dangling-ok; cat link-dir/run.sh | head -1`);
            print(`files=${src.files}`);
            r.stdout
        "#);
        out.assert_code(0);
        for want in ["spaces", "unicode", "dash", "backslash", "nl-ok", "empty-ok", "[check] executable", "x-ok", "nx-ok", "dangling-ok", "#!/bin/sh"] {
            assert!(out.stdout.contains(want), "missing {want:?} in\n{}", out.stdout);
        }
        assert!(out.stdout.contains(&format!("files={files}")), "{}", out.stdout);
        let verify = &out.entries("source.verify")[0];
        assert_eq!(verify["file_set_equal"], true);
        assert_eq!(verify["archive_sha256_local"], verify["archive_sha256_sandbox"]);
        rfs.assert_no_leftovers();
    }

    fn ships_the_commit_not_the_working_tree_and_subdir_roots_pin_the_subtree(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("pkg/lib.txt", "v1\n");
        repo.write("other/x.txt", "x\n");
        repo.commit("pkg");
        let subtree = repo.git(&["rev-parse", "HEAD:pkg"]);
        let out = rfs.run(&repo.path().join("pkg"), r#"
            let src = sync_source(#{ path: "pkg" });
            let r = step("ls", "ls; cat lib.txt");
            assert(r.stdout == "lib.txt\nv1\n", r.stdout);
            print(src.tree_digest);
        "#);
        out.assert_code(0);
        assert!(out.stdout.contains(&subtree), "tree digest is the subtree id {subtree}: {}", out.stdout);
        assert_eq!(out.entries("placement")[0]["labels"]["relayflows/tree-digest"], subtree.as_str());
        rfs.assert_no_leftovers();
    }

    fn export_ignore_does_not_change_what_ships(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write(".gitattributes", "secret-ish.txt export-ignore\n");
        repo.write("secret-ish.txt", "still committed\n");
        repo.commit("attrs");
        let out = rfs.run(repo.path(), r#"step("cat", "cat secret-ish.txt");"#);
        out.assert_code(0);
        assert!(out.stdout.contains("still committed"));
        rfs.assert_no_leftovers();
    }

    fn submodules_are_refused_by_default_and_included_on_request(rfs: &Rfs) {
        let sub = Repo::new();
        sub.write("lib.txt", "from submodule\n");
        let pinned = sub.commit("lib");
        let repo = Repo::new();
        repo.git(&["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.path().to_str().unwrap(), "vendor/lib"]);
        repo.commit("add submodule");
        let marker = tempfile::tempdir().unwrap().keep().join("RAN");
        let out = rfs.run(repo.path(), &marker_script(&marker, "sync_source();"));
        assert_refused_nothing_ran(rfs, &out, &marker, "vendor/lib");
        assert!(out.stderr.contains("submodules"), "{}", out.stderr);

        // A later commit in the submodule's checkout is not what ships: the pinned one is.
        sub.write("lib.txt", "newer\n");
        sub.commit("newer");
        let out = rfs.run(repo.path(), r#"
            sync_source(#{ submodules: "include" });
            let r = step("cat", "cat vendor/lib/lib.txt");
            assert(r.stdout == "from submodule\n", r.stdout);
        "#);
        out.assert_code(0);
        let subs = &out.entries("source.resolved")[0]["submodules"];
        assert_eq!(subs[0]["commit"], pinned.as_str());
        rfs.assert_no_leftovers();

        // A fresh clone without `submodule update --init` cannot include it.
        let clone = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("git").args(["clone", "-q", repo.path().to_str().unwrap(), clone.path().join("c").to_str().unwrap()]).status().unwrap();
        assert!(st.success());
        let marker = clone.path().join("RAN");
        let out = rfs.run(&clone.path().join("c"), &marker_script(&marker, "sync_source(#{ submodules: \"include\" });"));
        assert_refused_nothing_ran(rfs, &out, &marker, "is not initialised");
    }

    fn implicit_bind_by_the_first_step_is_journaled(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"step("ls", "test -f reproducer-marker.txt");"#);
        out.assert_code(0);
        assert_eq!(out.entries("source.pin")[0]["implicit"], true);
        rfs.assert_no_leftovers();
    }

    fn second_sync_with_other_options_is_refused(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("pkg/a", "a");
        repo.commit("pkg");
        let out = rfs.run(repo.path(), r#"
            let a = sync_source();
            let b = sync_source();
            assert(a == b);
            sync_source(#{ path: "pkg" });
        "#);
        out.assert_code(3);
        assert!(out.stderr.contains("already bound"), "{}", out.stderr);
        rfs.assert_no_leftovers();
    }

    fn large_blobs_stored_whole_in_a_pack_stream_and_arrive_intact(rfs: &Rfs) {
        let repo = Repo::new();
        // Pseudo-random, incompressible-ish content of 9 MiB (more than
        // the builder's buffers), packed at `git add` time (as git does for
        // big files) and again by a repack.
        let mut data = Vec::with_capacity(9 << 20);
        let mut x: u64 = 0x9e3779b97f4a7c15;
        while data.len() < 9 << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.extend_from_slice(&x.to_le_bytes());
        }
        repo.write_bytes("big.bin", &data);
        repo.git(&["-c", "core.bigFileThreshold=1m", "add", "big.bin"]);
        repo.git(&["commit", "-q", "-m", "big"]);
        repo.git(&["repack", "-a", "-d", "-q"]);
        assert!(repo.git(&["count-objects", "-v"]).contains("count: 0"), "objects must all be packed");
        let want = {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(&data))
        };
        let out = rfs.run(repo.path(), &format!(r#"
            sync_source();
            let r = step("sum", "sha256sum big.bin");
            assert(r.stdout.starts_with("{want}"), r.stdout);
        "#));
        out.assert_code(0);
        rfs.assert_no_leftovers();
    }

    // Whole blobs in a pack are read from the pack by rfs itself (not
    // through libgit2, which would check them with its slower SHA-1): they
    // arrive intact, and one whose pack entry holds another object's
    // content (here: the index's offsets of two same-size blobs swapped)
    // is refused, never shipped as the committed file.
    fn packed_blobs_arrive_intact_and_a_misplaced_pack_entry_is_refused(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("a.txt", "aaaa\n");
        repo.write("b.txt", "bbbb\n");
        repo.write("dir/c.txt", &"cccc".repeat(3000));
        repo.commit("three files");
        repo.git(&["gc", "-q"]);
        assert!(repo.git(&["count-objects", "-v"]).contains("count: 0"), "objects must all be packed");
        let out = rfs.run(repo.path(), r#"
            sync_source();
            let r = step("cat", "cat a.txt b.txt && wc -c < dir/c.txt");
            assert(r.stdout == "aaaa\nbbbb\n12000\n", r.stdout);
        "#);
        out.assert_code(0);

        let id = |rev: &str| hex::decode(repo.git(&["rev-parse", rev]).trim()).unwrap();
        let (a, b) = (id("HEAD:a.txt"), id("HEAD:b.txt"));
        let pack_dir = repo.path().join(".git/objects/pack");
        let idx = std::fs::read_dir(&pack_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "idx"))
            .unwrap();
        let mut bytes = std::fs::read(&idx).unwrap();
        let total = u32::from_be_bytes(bytes[8 + 4 * 255..8 + 4 * 256].try_into().unwrap()) as usize;
        let names = 8 + 1024;
        let slot = |id: &[u8]| (0..total).find(|i| &bytes[names + i * 20..names + i * 20 + 20] == id).unwrap();
        let (ia, ib) = (slot(&a), slot(&b));
        let off = |i: usize| names + total * 24 + i * 4;
        for k in 0..4 {
            bytes.swap(off(ia) + k, off(ib) + k);
        }
        make_writable(&idx);
        std::fs::write(&idx, &bytes).unwrap();
        assert_sync_refused(rfs, &repo, "read from its pack does not hash back to its id");
    }

    // Regression: a loose object was streamed from the object database
    // without checking it against its id (libgit2 verifies what it reads
    // whole, not what it streams), so a corrupt or substituted object
    // shipped as the committed file.
    fn a_loose_object_whose_content_is_not_its_id_is_refused(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("a.txt", "aaaa\n");
        repo.write("b.txt", "bbbb\n");
        repo.commit("two files of one size");
        let object = |rev: &str| {
            let id = repo.git(&["rev-parse", rev]);
            let id = id.trim();
            repo.path().join(".git/objects").join(&id[..2]).join(&id[2..])
        };
        let (a, b) = (object("HEAD:a.txt"), object("HEAD:b.txt"));
        assert!(a.is_file() && b.is_file(), "loose objects expected");
        // a.txt's object now inflates to b.txt's content (same size).
        make_writable(&a);
        std::fs::copy(&b, &a).unwrap();
        assert_sync_refused(rfs, &repo, "does not hash back to its id");
    }
}

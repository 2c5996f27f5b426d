//! Where rfs does not run as root (#35): `local`'s limits need cgroups
//! and a mounted tmpfs, which need root here, so a limit a script asks
//! for is refused before anything runs, naming why, and the default caps
//! are journaled and said as not enforced — never silently dropped. Run
//! as `nobody` when the tests run as root.

mod common;
use common::*;
#[path = "common/unprivileged.rs"]
mod unprivileged;
use unprivileged::*;

#[test]
fn where_rfs_is_not_root_a_limit_asked_for_is_refused_and_the_defaults_are_said_not_enforced() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let run = |script: &str| run_unprivileged(&rfs, repo.path(), script, &[]);
    let asked = run(r#"sandbox(#{ pids: 64 }); step("never", "echo never-ran");"#);
    asked.assert_code(3);
    assert!(!asked.stdout.contains("never-ran"), "{}", asked.stdout);
    assert!(
        asked.stderr.contains(
            "cannot enforce the process limit (64) asked by the script's sandbox() option"
        ) && asked.stderr.contains("need root"),
        "{}",
        asked.stderr
    );
    let none = run(r#"step("one", "echo ran");"#);
    none.assert_code(0);
    assert!(none.stdout.contains("[one] ran"), "{}", none.stdout);
    let placed = &none.entries("placement")[0];
    assert_eq!(
        placed["labels"]["relayflows/owner-uid"],
        unprivileged_uid().to_string(),
        "rfs ran as the unprivileged user"
    );
    let limits = &placed["isolation"]["limits"];
    assert_eq!(limits["enforced"], serde_json::json!([]), "{limits}");
    let not = limits["not_enforced"].to_string();
    assert!(
        not.contains("process limit 4096") && not.contains("disk limit"),
        "{limits}"
    );
    assert!(
        none.stderr
            .contains("warning: not enforced: process limit 4096"),
        "{}",
        none.stderr
    );
    rfs.assert_no_leftovers();
}

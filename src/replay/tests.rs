use super::*;

fn st(name: &str, exit: i32, out: &str) -> StepFact {
    StepFact {
        name: name.into(),
        exit: Some(exit),
        ran: true,
        stdout_sha256: out.into(),
    }
}

fn replay_of(env: Environment, allow: bool) -> ReplayOf {
    ReplayOf {
        run_id: "r0".into(),
        out_dir: "/o".into(),
        journal_head: "h".into(),
        journal_sha256: "s".into(),
        commit: "c".into(),
        environment: Some(env),
        allow_other_image: allow,
        services: Default::default(),
    }
}

fn image(id: &str) -> Environment {
    Environment {
        image: Some(crate::events::ImagePin {
            id: id.into(),
            repo_digests: vec![],
        }),
        host: None,
    }
}

fn host(kernel: &str, packages: &str) -> Environment {
    Environment {
        image: None,
        host: Some(crate::events::HostFingerprint {
            kernel: kernel.into(),
            os: Some("debian 12".into()),
            packages_sha256: Some(packages.into()),
        }),
    }
}

#[test]
fn a_different_image_is_refused_naming_both_unless_allowed() {
    let c = environment_check(
        &replay_of(image("sha256:aa"), false),
        Some(&image("sha256:bb")),
    );
    let why = c.refused.expect("refused");
    assert!(
        why.contains("sha256:aa") && why.contains("sha256:bb"),
        "{why}"
    );
    assert!(why.contains("--allow-other-image"), "{why}");
    let c = environment_check(
        &replay_of(image("sha256:aa"), true),
        Some(&image("sha256:bb")),
    );
    assert_eq!(c.refused, None);
    assert!(
        c.warnings[0].contains("--allow-other-image"),
        "{:?}",
        c.warnings
    );
    let same = environment_check(
        &replay_of(image("sha256:aa"), false),
        Some(&image("sha256:aa")),
    );
    assert_eq!(same, EnvironmentCheck::default());
}

#[test]
fn a_bundle_that_pins_no_image_is_replayed_with_a_warning_saying_so() {
    let mut of = replay_of(image("sha256:aa"), false);
    of.environment = None;
    let c = environment_check(&of, Some(&image("sha256:bb")));
    assert_eq!(c.refused, None);
    assert!(c.warnings[0].contains("pins no image"), "{:?}", c.warnings);
}

#[test]
fn a_different_host_is_a_warning_naming_what_differs() {
    let c = environment_check(
        &replay_of(host("6.1", "p1"), false),
        Some(&host("6.8", "p2")),
    );
    assert_eq!(c.refused, None);
    let w = &c.warnings[0];
    assert!(
        w.contains("kernel 6.8 (was 6.1)") && w.contains("packages"),
        "{w}"
    );
    let same = environment_check(
        &replay_of(host("6.1", "p1"), false),
        Some(&host("6.1", "p1")),
    );
    assert_eq!(same, EnvironmentCheck::default());
}

#[test]
fn compare_names_exit_and_strict_stdout() {
    let a = vec![st("build", 0, "aa"), st("test", 1, "bb")];
    let b = vec![
        st("build", 0, "ab"),
        st("test", 0, "bb"),
        st("extra", 0, "cc"),
    ];
    let rows = compare(&a, &b, false);
    assert_eq!(
        rows.iter().map(|r| r.matches).collect::<Vec<_>>(),
        vec![true, false, false]
    );
    let rows = compare(&a, &b, true);
    assert!(!rows[0].matches, "stdout differs under --strict");
    let t = table(&rows, true);
    assert!(t.contains("extra") && t.contains("(no step)"), "{t}");
}

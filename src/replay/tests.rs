use super::*;

fn st(name: &str, exit: i32, out: &str) -> StepFact {
    StepFact {
        name: name.into(),
        exit: Some(exit),
        ran: true,
        stdout_sha256: out.into(),
    }
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

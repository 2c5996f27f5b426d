//! The agent's start of a wrapped step against the wrapper itself: the
//! same argv, environment and directories, run natively and by
//! `/bin/sh`, say the same on stdout and stderr and end the same.

use super::*;
use crate::provider::wrapper::{NAME, SCRIPT};
use std::io::Read as _;

/// (stdout, stderr, wait status) of a started command.
fn collect(s: Spawned) -> (String, String, i32) {
    let read = |fd: OwnedFd| {
        let mut t = String::new();
        std::fs::File::from(fd).read_to_string(&mut t).unwrap();
        t
    };
    let (out, err) = (read(s.out), read(s.err));
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(s.pid, &mut status, 0) };
    (out, err, status)
}

fn native(argv: &[String], env: &[(String, String)]) -> (String, String, i32) {
    let null = std::fs::File::open("/dev/null").unwrap();
    let s = spawn(argv, env, "/", null.as_raw_fd(), &mut Stack::new().unwrap())
        .unwrap_or_else(|e| panic!("{e:?}"));
    collect(s)
}

fn shell(argv: &[String], env: &[(String, String)]) -> (String, String, i32) {
    use std::os::unix::process::ExitStatusExt as _;
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.into_raw(),
    )
}

#[test]
fn a_wrapped_step_started_natively_says_and_ends_as_its_wrapper_does() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(root.join("sub"), root.join("link")).unwrap();
    std::os::unix::fs::symlink("/", root.join("out")).unwrap();
    let r = root.to_str().unwrap().to_owned();
    let home = tmp.path().to_str().unwrap().to_owned();
    let command = r#"pwd; echo "PWD=$PWD OLDPWD=$OLDPWD $0 $#"; env | sort; echo oops >&2; exit 3"#;
    let cases = [
        (format!("{r}/link"), r.clone(), home.clone()),
        (r.clone(), r.clone(), home.clone()),
        (format!("{r}/sub"), r.clone(), format!("{home}/gone")),
        (format!("{r}/sub"), format!("{r}/gone"), home.clone()),
        (format!("{r}/gone"), r.clone(), home.clone()),
        (format!("{r}/out"), r.clone(), home.clone()),
        (format!("{r}/sub"), r.clone(), String::new()),
    ];
    for (dir, root, home) in cases {
        for nonce in ["n0nce", ""] {
            let argv: Vec<String> = ["/bin/sh", "-c", SCRIPT, NAME, &dir, &root, command, nonce]
                .map(String::from)
                .to_vec();
            let env = vec![
                ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
                ("HOME".to_owned(), home.clone()),
                ("PWD".to_owned(), "/elsewhere".to_owned()),
                ("X".to_owned(), "1".to_owned()),
            ];
            assert_eq!(
                native(&argv, &env),
                shell(&argv, &env),
                "{dir} {root} {home} {nonce:?}"
            );
        }
    }
}

#[test]
fn a_command_is_started_exactly_or_refused_naming_why() {
    let env = vec![("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
    let argv = ["sh", "-c", "pwd; exit 4"].map(String::from);
    let null = std::fs::File::open("/dev/null").unwrap();
    let s = spawn(
        &argv,
        &env,
        "/tmp",
        null.as_raw_fd(),
        &mut Stack::new().unwrap(),
    )
    .unwrap();
    let (out, _, status) = collect(s);
    assert_eq!((out.as_str(), status >> 8), ("/tmp\n", 4));
    let e = spawn(
        &argv,
        &env,
        "/nonexistent",
        null.as_raw_fd(),
        &mut Stack::new().unwrap(),
    )
    .err()
    .unwrap();
    assert!(e.cwd, "{e:?}");
    let missing = ["no-such-program-rfs"].map(String::from);
    let e = spawn(
        &missing,
        &env,
        "/",
        null.as_raw_fd(),
        &mut Stack::new().unwrap(),
    )
    .err()
    .unwrap();
    assert!(!e.cwd && e.message.contains("not found"), "{e:?}");
}

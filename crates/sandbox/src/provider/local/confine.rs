//! The in-sandbox wrapper's checks done by a command's start itself
//! ([`crate::provider::wrapper`]): a wrapped command in a sandbox isolated
//! in namespaces starts as `/bin/sh -c COMMAND sh` directly, one shell
//! instead of two (the wrapper's shell cost as much as the command's on a
//! trivial step). The second spawn child, already the command's process
//! (no capabilities, `no_new_privs`, its stdio set up, in
//! [`START_DIR`](crate::provider::wrapper::START_DIR)), checks what the
//! wrapper checks in the same order, says the same lines on stderr and
//! exits with the same codes; the command sees the environment the
//! wrapper's `cd` leaves (`PWD`, `OLDPWD`). Raw system calls only, on
//! data prepared before the `clone`. The gVisor agent's starts do the same
//! checks with it ([`super::gvisor`]).

use std::cell::UnsafeCell;
use std::ffi::CString;

use super::errors::SpawnError;
use crate::provider::wrapper::{Wrapped, EXIT_CWD_ESCAPE, EXIT_CWD_MISSING};

/// The longest physical cwd (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// `PWD=` followed by room for the physical cwd.
type PwdBuf = UnsafeCell<[u8; 4 + PATH_MAX]>;

/// A wrapped command's checks, prepared.
pub(super) struct Confine {
    /// `$HOME` of the command's environment (`None`: unset or empty).
    home: Option<CString>,
    root: CString,
    dir: CString,
    /// `rfs-started:NONCE\n` (empty without a nonce).
    started: Vec<u8>,
    /// `rfs-refused:NONCE:`.
    refused: Vec<u8>,
    /// The command's `PWD=` entry, completed by the child (an entry of
    /// its `envp`).
    pwd: Box<PwdBuf>,
}

impl Confine {
    /// The checks of `w`, run with environment `env` (of duplicate names
    /// the last wins, as for the command).
    pub(super) fn prepare(
        w: &Wrapped<'_>,
        env: &[(String, String)],
    ) -> Result<Confine, SpawnError> {
        let c = |s: &str| {
            CString::new(s).map_err(|_| SpawnError::NulByte {
                what: "the wrapper's arguments",
            })
        };
        let home = env
            .iter()
            .rev()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
            .map(c)
            .transpose()?;
        let started = if w.nonce.is_empty() {
            vec![]
        } else {
            format!("rfs-started:{}\n", w.nonce).into_bytes()
        };
        let mut pwd = Box::new(UnsafeCell::new([0u8; 4 + PATH_MAX]));
        pwd.get_mut()[..4].copy_from_slice(b"PWD=");
        Ok(Confine {
            home,
            root: c(w.root)?,
            dir: c(w.dir)?,
            started,
            refused: format!("rfs-refused:{}:", w.nonce).into_bytes(),
            pwd,
        })
    }

    /// The command's `PWD=` entry (valid once [`Confine::check`] passed).
    pub(super) fn pwd_entry(&self) -> *const libc::c_char {
        self.pwd.get().cast()
    }

    /// In the command's process before its exec: the wrapper's checks;
    /// exits as the wrapper does when one fails.
    ///
    /// # Safety
    /// Raw system calls only; the thread owning `self` is suspended.
    pub(super) unsafe fn check(&self) {
        if let Some(home) = &self.home {
            if !is_dir(home) {
                self.refuse(b"home", &[], EXIT_CWD_MISSING);
            }
        }
        if !is_dir(&self.root) {
            self.refuse(b"root", &[], EXIT_CWD_MISSING);
        }
        if libc::chdir(self.dir.as_ptr()) != 0 {
            self.refuse(b"cwd", &[], EXIT_CWD_MISSING);
        }
        let buf = &mut *self.pwd.get();
        let n = libc::syscall(libc::SYS_getcwd, buf[4..].as_mut_ptr(), PATH_MAX);
        if n <= 0 || buf[4] != b'/' {
            self.refuse(b"cwd", &[], EXIT_CWD_MISSING);
        }
        // With its NUL.
        let pwd = &buf[4..4 + n as usize - 1];
        if !inside(pwd, self.root.as_bytes()) {
            self.refuse(b"escape:", pwd, EXIT_CWD_ESCAPE);
        }
        if !self.started.is_empty() {
            write_all(&[&self.started]);
        }
    }

    unsafe fn refuse(&self, what: &[u8], detail: &[u8], code: i32) -> ! {
        write_all(&[&self.refused, what, detail, b"\n"]);
        libc::_exit(code)
    }
}

/// `case "$PWD/" in "$ROOT"/*)`: `pwd/` starts with `root/`.
fn inside(pwd: &[u8], root: &[u8]) -> bool {
    (0..=root.len()).all(|i| {
        let want = root.get(i).copied().unwrap_or(b'/');
        let have = match pwd.get(i) {
            Some(b) => Some(*b),
            None if i == pwd.len() => Some(b'/'),
            None => None,
        };
        have == Some(want)
    })
}

/// `[ -d PATH ]`: it exists (links followed) and is a directory.
unsafe fn is_dir(path: &CString) -> bool {
    let mut st: libc::stat = std::mem::zeroed();
    libc::stat(path.as_ptr(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// One line on stderr, in one `writev` (as the wrapper's `printf`).
unsafe fn write_all(parts: &[&[u8]]) {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 4];
    for (v, p) in iov.iter_mut().zip(parts) {
        v.iov_base = p.as_ptr() as *mut libc::c_void;
        v.iov_len = p.len();
    }
    libc::writev(2, iov.as_ptr(), parts.len().min(4) as libc::c_int);
}

#[cfg(test)]
mod tests {
    use super::super::launch::SpawnSpec;
    use super::super::namespace_init::Init;
    use super::super::probe::availability;
    use super::inside;
    use crate::provider::wrapper::{argv, Wrapped};
    use std::io::Read;
    use std::os::fd::AsFd;

    #[test]
    fn inside_is_the_wrappers_case_pattern() {
        assert!(inside(b"/h/src", b"/h/src"));
        assert!(inside(b"/h/src/a", b"/h/src"));
        assert!(!inside(b"/h/srcx", b"/h/src"));
        assert!(!inside(b"/h", b"/h/src"));
        assert!(!inside(b"/", b"/h/src"));
    }

    /// (exit code, stdout, stderr) of `spec` started in `init`.
    fn run(init: &Init, spec: &SpawnSpec<'_>) -> (Option<i32>, String, String) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let (mut out_r, out_w) = crate::provider::input::pipe_cloexec().unwrap();
        let (mut err_r, err_w) = crate::provider::input::pipe_cloexec().unwrap();
        let spec = SpawnSpec {
            stdio: [null.as_fd(), out_w.as_fd(), err_w.as_fd()],
            ..*spec
        };
        let mut child = init.spawn(&spec).unwrap();
        drop((out_w, err_w));
        let status = rt.block_on(child.wait()).unwrap();
        let text = |fd: &mut std::os::fd::OwnedFd| {
            let mut s = String::new();
            std::fs::File::from(fd.try_clone().unwrap())
                .read_to_string(&mut s)
                .unwrap();
            s
        };
        (status.code(), text(&mut out_r), text(&mut err_r))
    }

    /// The wrapper's checks done by the start say and do exactly what
    /// the wrapper's shell does: the command's output and environment,
    /// each refusal's line and exit code.
    #[test]
    fn checks_done_by_the_start_match_the_wrappers_shell_case_by_case() {
        if availability().is_err() {
            eprintln!("skipped: namespaces unavailable here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "tmp", "root", "home/src/sub", "home/sr"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink("/tmp", dir.path().join("home/src/out")).unwrap();
        std::fs::write(dir.path().join("home/src/file"), "x").unwrap();
        // Entered only with a capability the command does not have.
        std::fs::create_dir(dir.path().join("home/src/locked")).unwrap();
        std::fs::set_permissions(
            dir.path().join("home/src/locked"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .unwrap();
        let init = Init::for_sandbox(dir.path(), &crate::network::NetworkPolicy::Host).unwrap();
        let h = dir.path().join("home").display().to_string();
        let null = std::fs::File::open("/dev/null").unwrap();
        let show = r#"echo "$PWD|$OLDPWD|$0|$#|$*"; env | sort; echo oops >&2"#;
        // (cwd, root, HOME, command, nonce)
        let cases: Vec<(String, String, &str, &str, &str)> = vec![
            (
                format!("{h}/src/sub"),
                format!("{h}/src"),
                h.as_str(),
                show,
                "n1",
            ),
            (format!("{h}/src"), format!("{h}/src"), "", show, "n1"),
            (
                format!("{h}/src/sub"),
                format!("{h}/src"),
                h.as_str(),
                show,
                "",
            ),
            (
                format!("{h}/src/sub"),
                format!("{h}/src"),
                h.as_str(),
                "echo a; (",
                "n1",
            ),
            (
                format!("{h}/src/sub"),
                format!("{h}/src"),
                h.as_str(),
                "exit 7",
                "n1",
            ),
            (
                format!("{h}/src/out"),
                format!("{h}/src"),
                h.as_str(),
                show,
                "n1",
            ),
            (
                format!("{h}/src"),
                format!("{h}/sr"),
                h.as_str(),
                show,
                "n1",
            ),
            (
                format!("{h}/src/nope"),
                format!("{h}/src"),
                h.as_str(),
                show,
                "n1",
            ),
            (
                format!("{h}/src/file"),
                format!("{h}/src"),
                h.as_str(),
                show,
                "n1",
            ),
            (
                format!("{h}/src/locked"),
                format!("{h}/src"),
                h.as_str(),
                show,
                "n1",
            ),
            (
                format!("{h}/src/sub"),
                format!("{h}/gone"),
                h.as_str(),
                show,
                "n1",
            ),
            (
                format!("{h}/src/sub"),
                format!("{h}/src"),
                "/nowhere",
                show,
                "n1",
            ),
        ];
        for (cwd, root, home, command, nonce) in &cases {
            let wrapped = argv(cwd, root, command, nonce);
            let w = Wrapped::parse(&wrapped).unwrap();
            let native = w.command_argv();
            let env = vec![
                ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
                ("HOME".to_owned(), home.to_string()),
                ("PWD".to_owned(), "/elsewhere".to_owned()),
                ("OLDPWD".to_owned(), "/before".to_owned()),
            ];
            let spec = SpawnSpec {
                argv: &wrapped,
                env: &env,
                cwd: crate::provider::wrapper::START_DIR,
                stdio: [null.as_fd(), null.as_fd(), null.as_fd()],
                terminal: false,
                exec_fd: None,
                confine: None,
            };
            let by_shell = run(&init, &spec);
            let by_start = run(
                &init,
                &SpawnSpec {
                    argv: &native,
                    confine: Some(w),
                    ..spec
                },
            );
            assert_eq!(
                by_start, by_shell,
                "cwd {cwd}, root {root}, HOME {home}: {command}"
            );
        }
    }
}

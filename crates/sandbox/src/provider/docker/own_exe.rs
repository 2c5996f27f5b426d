//! rfs's own executable inside a container, so that a sync is verified by
//! the native verifier ([`crate::source::native_check`]) there instead of
//! by the image's POSIX tools (busybox's `sha256sum` has no SHA extensions:
//! about 150 MB/s against 1.3 GB/s here).
//!
//! The executable is linked into the sandbox's stream lane (module `lane`)
//! or, without one, copied into the sandbox home, together with what it
//! needs to start: its program interpreter (from the ELF `PT_INTERP`) and
//! the shared objects that interpreter resolves for it on this machine
//! (`ld.so --list`), and is started through that interpreter with
//! `--inhibit-cache --library-path DIR`, so nothing of the image's own C
//! library is used. A static executable is copied alone. Whether it starts
//! (architecture, `noexec`, seccomp) is probed before the archive is
//! streamed; a sandbox where it does not is verified with the POSIX script,
//! and the journal says why ([`crate::provider::NativeVerifier::prepare_own_executable`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Name of the executable in the bundle directory.
const EXE: &str = "rfs";
/// `PT_INTERP`: the program header naming the interpreter.
const PT_INTERP: u32 = 3;

/// What an executable needs to start in a container of the same kernel
/// architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ExecutableBundle {
    /// (name in the bundle directory, local path), the executable first.
    pub files: Vec<(String, PathBuf)>,
    /// Name of the program interpreter in the bundle (`None`: static).
    interp: Option<String>,
}

impl ExecutableBundle {
    /// The bundle of `exe` (an rfs executable; `/proc/self/exe` for the CLI).
    pub(super) fn of(exe: &Path) -> Result<ExecutableBundle, String> {
        let why = |e: &dyn std::fmt::Display| format!("{}: {e}", exe.display());
        let interp = elf_interp(exe).map_err(|e| why(&e))?;
        let mut files = vec![(EXE.to_string(), exe.to_path_buf())];
        let Some(interp) = interp else {
            return Ok(ExecutableBundle {
                files,
                interp: None,
            });
        };
        let out = std::process::Command::new(&interp)
            .arg("--list")
            .arg(for_a_child(exe))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| why(&format!("running {} --list: {e}", interp.display())))?;
        if !out.status.success() {
            return Err(why(&format!(
                "{} --list exited with {}: {}",
                interp.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let libs = parse_list(&String::from_utf8_lossy(&out.stdout)).map_err(|e| why(&e))?;
        let name = interp
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| why(&"the interpreter has no file name"))?;
        files.push((name.clone(), interp.clone()));
        for (soname, path) in libs {
            if !files.iter().any(|(n, _)| *n == soname) {
                files.push((soname, path));
            }
        }
        Ok(ExecutableBundle {
            files,
            interp: Some(name),
        })
    }

    /// The program part of a command running the bundle's executable from
    /// directory `dir` (its arguments follow).
    pub(super) fn program(&self, dir: &str) -> Vec<String> {
        let exe = format!("{dir}/{EXE}");
        match &self.interp {
            None => vec![exe],
            Some(interp) => vec![
                format!("{dir}/{interp}"),
                "--inhibit-cache".into(),
                "--library-path".into(),
                dir.into(),
                exe,
            ],
        }
    }
}

/// `/proc/self/...` names this process's files; a child reads the same
/// ones through `/proc/PID/...`.
fn for_a_child(p: &Path) -> PathBuf {
    match p.strip_prefix("/proc/self") {
        Ok(rest) => Path::new("/proc")
            .join(std::process::id().to_string())
            .join(rest),
        Err(_) => p.to_path_buf(),
    }
}

/// The interpreter an ELF executable names (`None`: statically linked).
/// Only 64-bit little-endian executables (x86-64, AArch64) are read.
fn elf_interp(exe: &Path) -> std::io::Result<Option<PathBuf>> {
    use std::os::unix::ffi::OsStringExt;
    let bad = |what: &str| std::io::Error::other(what.to_string());
    let mut f = std::fs::File::open(exe)?;
    let mut h = [0u8; 64];
    f.read_exact(&mut h)?;
    if &h[..4] != b"\x7fELF" {
        return Err(bad("not an ELF executable"));
    }
    if h[4] != 2 || h[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF executable"));
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as u64;
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let (phoff, phentsize, phnum) = (u64_at(&h, 32), u16_at(&h, 54), u16_at(&h, 56));
    if phentsize < 56 {
        return Err(bad("program headers too small"));
    }
    let mut ph = [0u8; 56];
    for i in 0..phnum {
        f.seek(SeekFrom::Start(phoff + i * phentsize))?;
        f.read_exact(&mut ph)?;
        if u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) != PT_INTERP {
            continue;
        }
        let (offset, size) = (u64_at(&ph, 8), u64_at(&ph, 32));
        if size == 0 || size > 4096 {
            return Err(bad("interpreter name of a strange size"));
        }
        let mut name = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(&mut name)?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        name.truncate(end);
        if !name.starts_with(b"/") {
            return Err(bad("interpreter name is not an absolute path"));
        }
        return Ok(Some(PathBuf::from(std::ffi::OsString::from_vec(name))));
    }
    Ok(None)
}

/// The shared objects in `ld.so --list` output: `soname => path (addr)`
/// lines (the vDSO and the interpreter itself have no `=>`).
fn parse_list(text: &str) -> Result<Vec<(String, PathBuf)>, String> {
    let mut libs = vec![];
    for line in text.lines() {
        let Some((soname, rest)) = line.trim().split_once(" => ") else {
            continue;
        };
        let path = rest.rsplit_once(" (").map_or(rest, |(p, _)| p).trim();
        if path == "not found" || !path.starts_with('/') {
            return Err(format!("shared object {soname} not found"));
        }
        if soname.contains('/') || soname.is_empty() {
            return Err(format!("strange shared object name {soname:?}"));
        }
        libs.push((soname.to_string(), PathBuf::from(path)));
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_output_names_each_library_once_with_its_path() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f0d)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f0e)\n";
        assert_eq!(
            parse_list(text).unwrap(),
            vec![
                ("libz.so.1".into(), "/lib/x86_64-linux-gnu/libz.so.1".into()),
                ("libc.so.6".into(), "/lib/x86_64-linux-gnu/libc.so.6".into()),
            ]
        );
        let e = parse_list("\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(e.contains("libfoo.so.1 not found"), "{e}");
    }

    /// This test binary is dynamically linked like rfs: its bundle holds
    /// it, its interpreter and libc, and runs through the interpreter.
    #[test]
    fn a_dynamic_executable_brings_its_interpreter_and_libraries() {
        let b = ExecutableBundle::of(Path::new("/proc/self/exe")).unwrap();
        assert_eq!(b.files[0], ("rfs".into(), "/proc/self/exe".into()));
        let interp = b.interp.clone().expect("dynamically linked");
        assert!(b.files.iter().any(|(n, _)| *n == interp), "{b:?}");
        assert!(
            b.files.iter().any(|(n, _)| n.starts_with("libc.so")),
            "{b:?}"
        );
        for (_, p) in &b.files {
            assert!(p.is_file(), "{}", p.display());
        }
        let argv = b.program("/h/x");
        assert_eq!(argv[0], format!("/h/x/{interp}"));
        assert_eq!(argv[1..4], ["--inhibit-cache", "--library-path", "/h/x"]);
        assert_eq!(argv[4], "/h/x/rfs");
    }

    #[test]
    fn a_file_that_is_not_an_executable_is_refused() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, &[b'#'; 128]).unwrap();
        let e = ExecutableBundle::of(f.path()).unwrap_err();
        assert!(e.contains("not an ELF executable"), "{e}");
    }
}

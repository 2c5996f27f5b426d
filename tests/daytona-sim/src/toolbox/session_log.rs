//! Capture of a session command's output: the server owns the read ends
//! of the command's stdout/stderr FIFOs and appends every *line* it reads
//! to the command's `output.log`, behind the daemon's `\x01\x01\x01`
//! (stdout) / `\x02\x02\x02` (stderr) prefixes (a last line without a
//! newline gets one, as the daemon's labelers give it). The exit code
//! the session shell reports (`exit.tmp`) is published as `exit_code` only
//! once both streams reached end of file, so a client that sees the exit
//! code reads the complete log.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::isolation::chown;

pub(crate) const OUT: &[u8] = b"\x01\x01\x01";
pub(crate) const ERR: &[u8] = b"\x02\x02\x02";

/// The host paths of one command's capture.
#[derive(Clone)]
pub(crate) struct Capture {
    pub stdout_pipe: PathBuf,
    pub stderr_pipe: PathBuf,
    log: PathBuf,
    reported_exit: PathBuf,
    exit: PathBuf,
}

impl Capture {
    /// Paths inside the command's host directory `dir`.
    pub fn new(dir: &Path) -> Capture {
        Capture {
            stdout_pipe: dir.join("stdout.pipe"),
            stderr_pipe: dir.join("stderr.pipe"),
            log: dir.join("output.log"),
            reported_exit: dir.join("exit.tmp"),
            exit: dir.join("exit_code"),
        }
    }

    /// Create both FIFOs (owned by the sandbox user) and start pumping
    /// them into the log; the pumps end when the command's side closes.
    pub fn start(&self) -> std::io::Result<()> {
        for p in [&self.stdout_pipe, &self.stderr_pipe] {
            let _ = std::fs::remove_file(p);
            nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .map_err(std::io::Error::from)?;
            chown(p)?;
        }
        let log = Arc::new(Mutex::new(OpenOptions::new().append(true).open(&self.log)?));
        let pumps: Vec<_> = [
            (self.stdout_pipe.clone(), OUT),
            (self.stderr_pipe.clone(), ERR),
        ]
        .into_iter()
        .map(|(pipe, prefix)| {
            let log = log.clone();
            std::thread::spawn(move || pump(&pipe, prefix, &log))
        })
        .collect();
        let me = self.clone();
        std::thread::spawn(move || {
            for p in pumps {
                let _ = p.join();
            }
            me.publish_exit();
        });
        Ok(())
    }

    /// Wait for the shell's exit code, then publish it (atomically).
    fn publish_exit(&self) {
        let _ = std::fs::remove_file(&self.stdout_pipe);
        let _ = std::fs::remove_file(&self.stderr_pipe);
        loop {
            match std::fs::read_to_string(&self.reported_exit) {
                Ok(s) if s.ends_with('\n') => {
                    let tmp = self.exit.with_extension("new");
                    if std::fs::write(&tmp, &s).is_ok() {
                        let _ = std::fs::rename(&tmp, &self.exit);
                    }
                    return;
                }
                // The shell is gone without reporting (session deleted).
                Err(_) if !self.reported_exit.parent().is_some_and(Path::exists) => return,
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Unblock pumps still waiting for the command to open its side (the
    /// session shell died first): a writer that opens and closes is EOF.
    pub fn abandon(&self) {
        for p in [&self.stdout_pipe, &self.stderr_pipe] {
            let _ = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p);
        }
        if let Ok(mut f) = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.reported_exit)
        {
            let _ = f.write_all(b"-1\n");
        }
    }
}

/// Copy `pipe` into `log` line by line, each line behind `prefix` (one
/// write per line), as the daemon's labelers do
/// (`while IFS= read -r line || [ -n "$line" ]; do printf 'PREFIX%s\n' "$line"; done`
/// in apps/daemon/pkg/session/execute.go): a line is logged once its
/// newline is read, and a last line without one gets one.
fn pump(pipe: &Path, prefix: &[u8], log: &Mutex<File>) {
    let Ok(mut f) = File::open(pipe) else { return };
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let write = |rec: &[u8]| -> bool {
        let mut out = Vec::with_capacity(rec.len() + prefix.len() + 1);
        out.extend_from_slice(prefix);
        out.extend_from_slice(rec);
        if !rec.ends_with(b"\n") {
            out.push(b'\n');
        }
        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
        l.write_all(&out).is_ok()
    };
    loop {
        match f.read(&mut buf) {
            Ok(0) => {
                if !line.is_empty() {
                    write(&line);
                }
                return;
            }
            Ok(n) => {
                line.extend_from_slice(&buf[..n]);
                while let Some(nl) = line.iter().position(|&b| b == b'\n') {
                    let rest = line.split_off(nl + 1);
                    if !write(&line) {
                        return;
                    }
                    line = rest;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

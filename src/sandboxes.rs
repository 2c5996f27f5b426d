//! Live sandboxes, across providers: `rfs ps` lists the ones rfs created
//! (live runs' and `--keep` ones), `rfs shell ID` opens an interactive
//! shell in one. Neither creates or destroys anything; `rfs rm ID` removes
//! named ones ([`rm`]), `rfs gc` those whose owner is gone.

pub(crate) mod rm;

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;
use rfs_sandbox::provider::owner::{owner_liveness, Liveness};
use rfs_sandbox::provider::{
    labels, select, Provider, ProviderError, PtyInput, PtyRequest, SandboxInfo,
};

/// Every provider that answers (or only `only`), with a line on stderr
/// naming `command` for each that does not (`rfs ps`, `rfs shell`, `rfs gc`,
/// `rfs rm`). A provider that is simply not configured here (daytona
/// without `DAYTONA_API_KEY`) has no sandboxes to show: it is said only
/// with `-v`, or when the user asked for that provider.
pub(crate) fn reachable(
    rt: &tokio::runtime::Runtime,
    only: Option<String>,
    command: &str,
) -> Result<Vec<Arc<dyn Provider>>, Error> {
    let asked = only.is_some();
    let names: Vec<String> = match only {
        Some(p) => vec![
            select::choose(Some(&p), None)
                .map_err(|e| Error::Usage(e.to_string()))?
                .name,
        ],
        None => select::known().iter().map(|s| s.to_string()).collect(),
    };
    let state = crate::settings::state_dir();
    let mut out = vec![];
    for name in names {
        let choice = select::ProviderChoice {
            name: name.clone(),
            reason: select::ChoiceReason::Flag,
        };
        let ready = match select::build(&choice, &state, None) {
            Ok(p) => rt.block_on(p.preflight()).map(|()| p),
            Err(e) => Err(e),
        };
        match ready {
            Ok(p) => out.push(p),
            Err(e @ ProviderError::Config(_)) if !asked => {
                tracing::info!("rfs {command}: provider {name} is not configured here: {e}")
            }
            Err(e) => errln!("rfs {command}: skipping provider {name}: {e}"),
        }
    }
    Ok(out)
}

/// What `rfs ps` says of a sandbox: whose it is and what works on it.
fn status(state: &std::path::Path, s: &SandboxInfo) -> String {
    let id = &s.id;
    match owner_liveness(&s.labels) {
        Liveness::Alive => format!(
            "in use by its live run (rfs pid {})",
            s.labels.get(labels::OWNER_PID).map_or("?", String::as_str)
        ),
        Liveness::Gone(_) if enterable(&s.state) && crate::runtime::kept::was_kept(state, id) => {
            format!("kept, its run has ended: `rfs shell {id}` enters it, `rfs rm {id}` removes it")
        }
        Liveness::Gone(_) if enterable(&s.state) => format!(
            "left by a run that never ended (its rfs was killed): `rfs shell {id}` enters it, `rfs rm {id}` removes it"
        ),
        Liveness::Gone(_) => format!(
            "left by an ended run, {} (it cannot be entered): `rfs rm {id}` removes it",
            s.state
        ),
        Liveness::Unknown(why) => {
            format!("owner unknown ({why}): `rfs rm --force {id}` removes it")
        }
    }
}

/// Whether the provider's state says the sandbox runs (a shell can be
/// opened in it): docker `running`, daytona `started`, every local one.
pub(crate) fn enterable(state: &str) -> bool {
    matches!(state.to_ascii_lowercase().as_str(), "running" | "started")
}

/// `rfs ps`: one line a sandbox: provider, id, run, age, and whose it is
/// with the commands that work on it.
pub(crate) fn ps(only: Option<String>, all: bool) -> Result<i32, Error> {
    let rt = tokio::runtime::Runtime::new().map_err(Error::internal)?;
    let me = rfs_sandbox::provider::owner::uid();
    let state = crate::settings::state_dir();
    let mut n = 0;
    for p in reachable(&rt, only, "ps")? {
        let list = match rt.block_on(p.list(&labels::rfs_selector())) {
            Ok(l) => l,
            Err(e) => {
                errln!("rfs: cannot list provider {}: {e}", p.name());
                continue;
            }
        };
        for s in list {
            let owner_uid = s.labels.get(labels::OWNER_USER);
            if !all && owner_uid.is_some_and(|u| *u != me) {
                continue;
            }
            n += 1;
            outln!(
                "{:<8} {:<40} {:<26} {:>6}  {}",
                p.name(),
                s.id,
                s.labels.get(labels::RUN_ID).map_or("?", String::as_str),
                age(&s.labels),
                status(&state, &s)
            );
        }
    }
    if n == 0 {
        errln!("rfs ps: no live rfs sandboxes");
    }
    Ok(exit_code::SUCCESS)
}

/// `2h`, `5m`, `40s` since the started-at label (`?` without one).
fn age(l: &labels::Labels) -> String {
    let Some(s) = crate::gc::age(l).map(|a| a.as_secs()) else {
        return "?".into();
    };
    match s {
        s if s >= 86400 => format!("{}d", s / 86400),
        s if s >= 3600 => format!("{}h", s / 3600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// `rfs shell ID`: an interactive shell in the sandbox's synced source
/// (its home when there is none); the shell's exit status.
pub(crate) fn shell(id: &str, only: Option<String>) -> Result<i32, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let mut found = None;
    for p in reachable(&rt, only, "shell")? {
        if let Ok(Some(info)) = rt.block_on(p.get(id)) {
            found = Some((p, info));
            break;
        }
    }
    let Some((p, info)) = found else {
        return Err(Error::Usage(format!(
            "no provider knows sandbox {id} (`rfs ps` lists the live ones)"
        )));
    };
    if info.labels.get(labels::CREATED_BY).map(String::as_str) != Some(labels::CREATED_BY_VALUE) {
        return Err(Error::Refused(format!(
            "sandbox {id} was not created by rfs; rfs opens shells only in its own"
        )));
    }
    let tty = std::io::stdin().is_terminal();
    let (cols, rows) = if tty {
        terminal_size().unwrap_or((80, 24))
    } else {
        (80, 24)
    };
    let mut env = vec![
        (
            "TERM".to_owned(),
            std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into()),
        ),
        ("RELAYFLOWS_SANDBOX_ID".to_owned(), id.to_owned()),
    ];
    for (label, var) in [
        (labels::RUN_ID, "RELAYFLOWS_RUN_ID"),
        (labels::SOURCE_COMMIT, "RELAYFLOWS_SOURCE_COMMIT"),
        (labels::TREE_DIGEST, "RELAYFLOWS_TREE_DIGEST"),
    ] {
        if let Some(v) = info
            .labels
            .get(label)
            .filter(|v| v.as_str() != labels::UNBOUND)
        {
            env.push((var.to_owned(), v.clone()));
        }
    }
    // Piped commands go to a non-interactive shell: an interactive one's
    // line editor flushes what was typed ahead of its first prompt, so
    // `echo CMDS | rfs shell ID` lost all but the first byte when the
    // shell started after they arrived (seen on a loaded machine). A
    // shell whose input is the PTY is interactive whatever its flags
    // (busybox ash printed its banner and lost the commands at 50 ms of
    // latency): it reads them from `cat` instead, through a pipe; the
    // `^D` sent when the input ends stops `cat`.
    let shell = if tty {
        "cd relayflows-source 2>/dev/null; exec /bin/sh -i"
    } else {
        "cd relayflows-source 2>/dev/null; cat | /bin/sh"
    };
    let req = PtyRequest {
        argv: vec!["/bin/sh".into(), "-c".into(), shell.into()],
        cwd: info.home.clone(),
        env,
        cols,
        rows,
    };
    let ch = rt
        .block_on(p.open_pty(id, &req))
        .map_err(|e| Error::Refused(format!("cannot open a shell in sandbox {id}: {e}")))?;
    errln!(
        "rfs: shell in {} sandbox {id} (exit the shell to leave; the sandbox stays)",
        p.name()
    );
    let _raw = if tty { RawMode::enter() } else { None };
    let outcome = bridge(&rt, ch, tty);
    drop(_raw);
    Ok(match outcome {
        Some(o) => o.exit.unwrap_or(exit_code::SCRIPT_FAILED),
        None => exit_code::INTERNAL,
    })
}

/// Pass stdin to the session and its output to stdout until it ends;
/// on a terminal, resizes follow the window.
fn bridge(
    rt: &tokio::runtime::Runtime,
    mut ch: rfs_sandbox::provider::PtyChannel,
    tty: bool,
) -> Option<rfs_sandbox::provider::ExecOutcome> {
    let input = ch.input.clone();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 4096];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => {
                    // Piped input ended: end of input for the shell too.
                    if !tty {
                        let _ = input.send(PtyInput::Data(vec![0x04]));
                    }
                    return;
                }
                Ok(n) => {
                    if input.send(PtyInput::Data(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let resize = ch.input.clone();
    rt.block_on(async move {
        let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok();
        loop {
            tokio::select! {
                chunk = ch.output.recv() => match chunk {
                    Some(bytes) => {
                        let mut out = std::io::stdout().lock();
                        let _ = out.write_all(&bytes);
                        let _ = out.flush();
                    }
                    None => break,
                },
                _ = async { match winch.as_mut() { Some(w) => { w.recv().await; } None => std::future::pending().await } } => {
                    if let Some((cols, rows)) = terminal_size() {
                        let _ = resize.send(PtyInput::Resize { cols, rows });
                    }
                }
            }
        }
        ch.exit.await.ok()
    })
}

/// The terminal's size, if stdin is one.
fn terminal_size() -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through a valid pointer.
    let r = unsafe { libc::ioctl(libc::STDIN_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

/// The terminal in raw mode while the shell runs; restored on drop.
struct RawMode(nix::sys::termios::Termios);

impl RawMode {
    fn enter() -> Option<RawMode> {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            &self.0,
        );
    }
}

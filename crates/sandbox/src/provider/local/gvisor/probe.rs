//! Whether gVisor can be used here: the isolation decision (runsc is
//! there, rfs may run it, namespaces work for the network namespace
//! under it) and `rfs doctor`'s probe, which starts a real gVisor
//! sandbox and runs a command in it.

use crate::provider::isolation::{IsolationError, IsolationInForce, IsolationRequest};

use super::runsc::{rootless, runsc, unusable};

/// How runsc runs here, for the journal and `rfs doctor`: as root, or
/// rootless as the user running rfs.
fn how() -> String {
    if rootless() {
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        format!("rootless, as uid {uid}")
    } else {
        "as root".into()
    }
}

/// What `local` has in force for `req` in mode `gvisor`, or why it
/// refuses (before anything runs). `network`: the network fact of the
/// namespaces sandbox gVisor runs in.
pub fn decide(
    req: &IsolationRequest,
    network: crate::network::NetworkFact,
) -> Result<IsolationInForce, IsolationError> {
    let refuse = |why: String| IsolationError::GvisorUnavailable {
        by: req.source.clone(),
        why,
    };
    if let Some(why) = unusable() {
        return Err(refuse(why));
    }
    if let Err(why) = super::super::probe::availability() {
        return Err(refuse(format!(
            "its sandbox runs in the namespaces sandbox's network namespace, and namespaces are not available: {why}"
        )));
    }
    let r = runsc().map_err(refuse)?;
    Ok(IsolationInForce {
        mode: super::MODE.into(),
        reason: format!(
            "requested by {}: gVisor's user-space kernel (runsc {}, {}), over a namespaces sandbox",
            req.source,
            r.version,
            how()
        ),
        network,
    })
}

/// For `rfs doctor`: start a throwaway gVisor sandbox and run `uname -r`
/// in it; what it said, or why it could not. Takes a second or two.
pub fn doctor_probe() -> Result<String, String> {
    if let Some(why) = unusable() {
        return Err(why);
    }
    let r = runsc()?;
    let tmp = std::env::temp_dir().join(format!("rfs-gvisor-probe-{}", std::process::id()));
    let result = probe_in(&tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|kernel| {
        format!(
            "gVisor works here: runsc {} at {} ({}), its kernel says {kernel}",
            r.version,
            r.path.display(),
            how()
        )
    })
}

fn probe_in(tmp: &std::path::Path) -> Result<String, String> {
    let dir = tmp.join("sandbox");
    for d in ["home", "tmp", "etc"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| format!("cannot prepare a probe: {e}"))?;
    }
    let state = tmp.join("runsc");
    let cid = format!("rfs-probe-{}", std::process::id());
    let g = super::GvisorSandbox::start(&cid, &dir, &state, None, [-1; 3], (&[], &[]))?;
    let said = run_in(&g, &["/bin/uname", "-r"]).and_then(|out| {
        if !out.status.success() {
            return Err(format!(
                "runsc exec failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                super::sandbox::debug_hint()
            ));
        }
        let kernel = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        // Older runsc (Debian 12's 20221219) refuses statx(AT_NO_AUTOMOUNT), which
        // coreutils' `ls` and `stat` use.
        let ls = run_in(&g, &["/bin/ls", "/"])?;
        Ok(if ls.status.success() {
            kernel
        } else {
            format!(
                "{kernel} (but `ls /` fails inside: {}; this runsc refuses statx with AT_NO_AUTOMOUNT; later gVisor releases accept it)",
                String::from_utf8_lossy(&ls.stderr).trim()
            )
        })
    });
    let gone = g.destroy();
    let said = said?;
    gone?;
    Ok(said)
}

/// Run `argv` in `g` and collect what it printed.
fn run_in(g: &super::GvisorSandbox, argv: &[&str]) -> Result<std::process::Output, String> {
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let (mut cmd, files) = g
        .exec_command(
            &argv,
            &[("PATH".into(), super::super::env::host_path().into())],
            "/",
            false,
        )
        .map_err(|e| e.to_string())?;
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run runsc exec: {e}"));
    for f in files {
        let _ = std::fs::remove_file(f);
    }
    out
}

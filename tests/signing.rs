//! Signed evidence checked by outside tools: `journal.sig` with the real
//! `ssh-keygen -Y verify`, `attestation.intoto.json` with an independent
//! DSSE verifier (tests/dsse_verify.py, Python `cryptography`), keys from
//! files and from a real `ssh-agent`, and `rfs verify`'s checks of both.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const SCRIPT: &str = r#"
step("build", "echo built");
step("check", "cat reproducer-marker.txt");
"#;

/// `ssh-keygen -t ed25519` into `dir/name` (+ `.pub`), with a passphrase
/// when given.
fn keygen(dir: &Path, name: &str, passphrase: &str) -> PathBuf {
    let key = dir.join(name);
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen runs (scripts/test.sh installs openssh-client)");
    assert!(st.success());
    key
}

fn pub_line(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub"))
        .unwrap()
        .trim()
        .to_owned()
}

/// An allowed-signers file granting `principal` the key `key`.
fn allowed(dir: &Path, principal: &str, key: &Path) -> PathBuf {
    let f = dir.join(format!("allowed-{principal}"));
    std::fs::write(&f, format!("{principal} {}\n", pub_line(key))).unwrap();
    f
}

/// `ssh-keygen -Y verify` of the run's journal; (success, output).
fn ssh_keygen_verify(out: &Path, allowed: &Path, identity: &str) -> (bool, String) {
    let o = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-n", "rfs", "-I", identity, "-f"])
        .arg(allowed)
        .arg("-s")
        .arg(out.join("journal.sig"))
        .stdin(std::fs::File::open(out.join("journal.jsonl")).unwrap())
        .output()
        .unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// `rfs verify OUT [--allowed-signers F] [--identity ID]`: Ok(stdout) when
/// it exits 0, Err(stderr) when it exits 4 (anything else fails the test).
fn rfs_verify(
    out: &Path,
    allowed: Option<&Path>,
    identity: Option<&str>,
) -> Result<String, String> {
    let mut c = Command::new(rfs_bin());
    c.arg("verify").arg(out);
    if let Some(a) = allowed {
        c.arg("--allowed-signers").arg(a);
    }
    if let Some(i) = identity {
        c.args(["--identity", i]);
    }
    let o = c.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    match o.status.code() {
        Some(0) => Ok(stdout),
        Some(4) => {
            assert!(!stdout.contains(": verified"), "{stdout}");
            Err(stderr)
        }
        other => panic!("rfs verify exited {other:?}\n{stdout}\n{stderr}"),
    }
}

/// A Python that has the `cryptography` package (scripts/test.sh installs
/// Debian's python3-cryptography when none has).
fn python_with_cryptography() -> PathBuf {
    for p in ["python3", "/usr/bin/python3"] {
        let ok = Command::new(p)
            .args(["-c", "import cryptography"])
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return p.into();
        }
    }
    panic!("no python3 with the `cryptography` package (scripts/test.sh installs python3-cryptography)");
}

/// The independent DSSE verifier; (success, output).
fn python_dsse_verify(out: &Path, pubkey: Option<&Path>) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dsse_verify.py");
    let mut c = Command::new(python_with_cryptography());
    c.arg(script).arg(out.join("attestation.intoto.json"));
    if let Some(k) = pubkey {
        c.arg(k);
    }
    let o = c.output().unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn statement(out: &Path) -> Value {
    use base64::Engine as _;
    let env: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("attestation.intoto.json")).unwrap(),
    )
    .unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(env["payload"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&payload).unwrap()
}

#[test]
fn signed_run_verifies_with_real_ssh_keygen_and_tampering_fails() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path(), "alice", "");
    let repo = Repo::new();
    let out = rfs.run_with(repo.path(), SCRIPT, &["--sign-key", key.to_str().unwrap()]);
    out.assert_code(0);
    let allowed = allowed(keys.path(), "alice@example.com", &key);

    let (ok, msg) = ssh_keygen_verify(&out.out_dir, &allowed, "alice@example.com");
    assert!(ok, "ssh-keygen -Y verify must accept journal.sig: {msg}");
    assert!(
        msg.contains("Good \"rfs\" signature for alice@example.com"),
        "{msg}"
    );
    let checked = rfs_verify(&out.out_dir, Some(&allowed), Some("alice@example.com")).unwrap();
    for line in [
        "ok: journal chain",
        "ok: EVIDENCE.md",
        "ok: files",
        "ok: bundle: the script and 0 module(s) match",
        "ok: signature: valid SSH signature (namespace rfs) over journal.jsonl by alice@example.com",
        "ok: attestation: in-toto Statement matches the journal (2 steps), DSSE signature valid",
    ] {
        assert!(checked.contains(line), "missing {line:?} in\n{checked}");
    }

    // The first fact names the signer (its fingerprint, never the key).
    let start = &out.entries("run.start")[0];
    assert!(start["signing_key"]["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("SHA256:"));

    // A tampered journal: ssh-keygen and rfs both reject it.
    let journal = out.out_dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(&journal, text.replace("\"exit\":0", "\"exit\":7")).unwrap();
    let (ok, msg) = ssh_keygen_verify(&out.out_dir, &allowed, "alice@example.com");
    assert!(!ok, "ssh-keygen must reject a tampered journal: {msg}");
    let e = rfs_verify(&out.out_dir, Some(&allowed), None).unwrap_err();
    assert!(e.contains("does not verify: journal chain"), "{e}");
    // Even with the chain recomputed, the signature catches the rewrite.
    rechain(&journal);
    let e = rfs_verify(&out.out_dir, Some(&allowed), None).unwrap_err();
    assert!(
        e.contains("does not verify: ") && e.contains("changed after signing"),
        "{e}"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn valid_signature_from_key_not_in_allowed_signers_fails() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let mallory = keygen(keys.path(), "mallory", "");
    let alice = keygen(keys.path(), "alice", "");
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        SCRIPT,
        &["--sign-key", mallory.to_str().unwrap()],
    );
    out.assert_code(0);
    let only_alice = allowed(keys.path(), "alice@example.com", &alice);
    // Cryptographically valid…
    rfs_verify(&out.out_dir, None, None).unwrap();
    // …but not by an allowed signer: both tools refuse.
    let (ok, _) = ssh_keygen_verify(&out.out_dir, &only_alice, "alice@example.com");
    assert!(!ok);
    let e = rfs_verify(&out.out_dir, Some(&only_alice), Some("alice@example.com")).unwrap_err();
    assert!(
        e.contains("not an allowed signer for identity `alice@example.com`"),
        "{e}"
    );
    // The right key for the wrong identity fails too.
    let mallory_allowed = allowed(keys.path(), "mallory@example.com", &mallory);
    let e = rfs_verify(
        &out.out_dir,
        Some(&mallory_allowed),
        Some("alice@example.com"),
    )
    .unwrap_err();
    assert!(e.contains("not an allowed signer"), "{e}");
    rfs_verify(
        &out.out_dir,
        Some(&mallory_allowed),
        Some("mallory@example.com"),
    )
    .unwrap();
}

#[test]
fn removed_signature_or_unsigned_run_fails_when_a_signer_is_required() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path(), "alice", "");
    let allowed = allowed(keys.path(), "alice@example.com", &key);
    let repo = Repo::new();
    let signed = rfs.run_with(repo.path(), SCRIPT, &["--sign-key", key.to_str().unwrap()]);
    signed.assert_code(0);
    std::fs::remove_file(signed.out_dir.join("journal.sig")).unwrap();
    let e = rfs_verify(&signed.out_dir, None, None).unwrap_err();
    assert!(e.contains("journal.sig is missing"), "{e}");

    let unsigned = rfs.run(repo.path(), SCRIPT);
    unsigned.assert_code(0);
    assert!(!unsigned.out_dir.join("journal.sig").exists());
    let ok = rfs_verify(&unsigned.out_dir, None, None).unwrap();
    assert!(ok.contains("ok: signature: none (unsigned run)"), "{ok}");
    assert!(ok.contains("steps), unsigned"), "{ok}");
    let e = rfs_verify(&unsigned.out_dir, Some(&allowed), None).unwrap_err();
    assert!(e.contains("requires a signature"), "{e}");
}

#[test]
fn encrypted_key_without_agent_is_refused_before_anything_runs() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path(), "locked", "correct horse");
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare(SCRIPT);
    let o = rfs
        .cmd(repo.path())
        .env_remove("SSH_AUTH_SOCK")
        .env("RFS_SIGNING_KEY", &key)
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(o, out_dir);
    out.assert_code(3);
    assert!(
        out.stderr.contains("is encrypted") && out.stderr.contains("no ssh-agent"),
        "{}",
        out.stderr
    );
    assert!(
        !out.out_dir.exists(),
        "nothing may run: no output directory"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn non_ed25519_key_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("rsa");
    assert!(Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap()
        .success());
    let repo = Repo::new();
    let out = rfs.run_with(repo.path(), SCRIPT, &["--sign-key", key.to_str().unwrap()]);
    out.assert_code(3);
    assert!(out.stderr.contains("ed25519 keys only"), "{}", out.stderr);
}

/// A real `ssh-agent` in the foreground on its own socket; killed on drop.
struct AgentProc {
    child: Child,
    sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl AgentProc {
    fn start() -> AgentProc {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(Stdio::null())
            .spawn()
            .expect("ssh-agent runs");
        for _ in 0..100 {
            if sock.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        AgentProc {
            child,
            sock,
            _dir: dir,
        }
    }

    /// `ssh-add` the key, answering its passphrase prompt through SSH_ASKPASS.
    fn add(&self, key: &Path, passphrase: &str) {
        let askpass = self._dir.path().join("askpass.sh");
        std::fs::write(&askpass, format!("#!/bin/sh\necho '{passphrase}'\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o700)).unwrap();
        let o = Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.sock)
            .env("SSH_ASKPASS", &askpass)
            .env("SSH_ASKPASS_REQUIRE", "force")
            .env("DISPLAY", ":0")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "ssh-add: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn encrypted_key_held_by_ssh_agent_signs_and_never_enters_the_bundle() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path(), "agentkey", "s3cret pass");
    let agent = AgentProc::start();
    agent.add(&key, "s3cret pass");
    let repo = Repo::new();
    for signing_path in [key.clone(), key.with_extension("pub")] {
        let (script, out_dir) = rfs.prepare(SCRIPT);
        let o = rfs
            .cmd(repo.path())
            .env("SSH_AUTH_SOCK", &agent.sock)
            .arg("run")
            .arg(&script)
            .arg("--out")
            .arg(&out_dir)
            .arg("--sign-key")
            .arg(&signing_path)
            .output()
            .unwrap();
        let out = finish(o, out_dir);
        out.assert_code(0);
        let allowed = allowed(keys.path(), "agent@example.com", &key);
        let (ok, msg) = ssh_keygen_verify(&out.out_dir, &allowed, "agent@example.com");
        assert!(ok, "{msg}");
        let (ok, msg) = python_dsse_verify(&out.out_dir, Some(&key.with_extension("pub")));
        assert!(ok, "independent DSSE verification: {msg}");
        assert_no_key_material(&out.out_dir, &key);
    }
}

/// No file of the bundle contains the private key (armored or its body).
fn assert_no_key_material(out: &Path, key: &Path) {
    let private = std::fs::read_to_string(key).unwrap();
    let body: String = private
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    for e in walk(out) {
        let bytes = std::fs::read(&e).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("PRIVATE KEY") && !text.contains(&body[..40]),
            "{} contains private key material",
            e.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn attestation_verifies_with_an_independent_dsse_implementation() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path(), "alice", "");
    let other = keygen(keys.path(), "other", "");
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"
step("build", "echo built");
step("flaky", "exit 3", #{ allow_failure: true });
"#,
        &["--sign-key", key.to_str().unwrap()],
    );
    out.assert_code(0);
    assert_no_key_material(&out.out_dir, &key);
    let (ok, msg) = python_dsse_verify(&out.out_dir, Some(&key.with_extension("pub")));
    assert!(ok, "{msg}");
    assert!(msg.contains("result: WARNED"), "{msg}");
    assert!(
        msg.contains(&format!("\"gitCommit\": \"{}\"", repo.head())),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("\"gitTree\": \"{}\"", repo.tree())),
        "{msg}"
    );
    let (ok, msg) = python_dsse_verify(&out.out_dir, Some(&other.with_extension("pub")));
    assert!(!ok, "another key must not verify: {msg}");

    // What the statement says about the run.
    let st = statement(&out.out_dir);
    assert_eq!(
        st["predicateType"],
        "https://in-toto.io/attestation/test-result/v0.1"
    );
    let run = &st["predicate"]["run"];
    assert_eq!(run["provider"], "local");
    assert_eq!(run["outcome"], "completed");
    assert_eq!(run["sandboxId"].as_str().unwrap(), out.sandbox_id());
    assert_eq!(run["steps"][1]["exit"], 3);
    assert_eq!(run["steps"][1]["result"], "failed-allowed");
    assert!(run["steps"][0]["durationMs"].is_u64());
    assert_eq!(
        run["scriptDigest"]["sha256"],
        out.entries("run.start")[0]["bundle"]["script"]["sha256"]
    );

    // Signed by the key, but not matching the journal: rfs refuses.
    let journal = out.out_dir.join("journal.jsonl");
    let orig = std::fs::read(&journal).unwrap();
    let mut forged_statement = st.clone();
    forged_statement["predicate"]["result"] = "PASSED".into();
    let forged = forge_envelope(&key, &forged_statement);
    std::fs::write(out.out_dir.join("attestation.intoto.json"), forged).unwrap();
    let e = rfs_verify(&out.out_dir, None, None).unwrap_err();
    assert!(
        e.contains("does not match the journal") && e.contains("result"),
        "{e}"
    );
    std::fs::write(&journal, orig).unwrap();
}

/// A DSSE envelope over `statement`, validly signed with `key` by rfs's
/// own signer (a forger holding the key).
fn forge_envelope(key: &Path, statement: &Value) -> String {
    let k = rfs::fuzzing::SigningKey::load_with_agent(key, None).unwrap();
    let payload = serde_json::to_vec(statement).unwrap();
    let env =
        rfs::fuzzing::dsse_seal(rfs::fuzzing::INTOTO_PAYLOAD_TYPE, &payload, Some(&k)).unwrap();
    serde_json::to_string(&env).unwrap()
}

#[test]
fn unsigned_run_has_an_unsigned_attestation_and_a_complete_bundle() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let state = rfs.state.path();
    std::fs::create_dir_all(state.join("scripts/lib")).unwrap();
    std::fs::write(
        state.join("scripts/lib/greet.rhai"),
        "fn hello() { \"hello from a module\" }\n",
    )
    .unwrap();
    let out = rfs.run(
        repo.path(),
        "import \"lib/greet\" as g;\nstep(\"say\", \"echo '\" + g::hello() + \"'\");\n",
    );
    out.assert_code(0);
    let (ok, msg) = python_dsse_verify(&out.out_dir, None);
    assert!(ok, "{msg}");
    assert!(
        msg.contains("signature: none") && msg.contains("result: PASSED"),
        "{msg}"
    );
    let bundle = &out.entries("run.start")[0]["bundle"];
    assert_eq!(bundle["modules"][0]["import"], "lib/greet");
    assert_eq!(
        std::fs::read_to_string(out.out_dir.join("bundle/lib/greet.rhai")).unwrap(),
        "fn hello() { \"hello from a module\" }\n"
    );
    let ok = rfs_verify(&out.out_dir, None, None).unwrap();
    assert!(
        ok.contains("ok: bundle: the script and 1 module(s) match"),
        "{ok}"
    );
    std::fs::write(
        out.out_dir.join("bundle/lib/greet.rhai"),
        "fn hello() { \"forged\" }\n",
    )
    .unwrap();
    let e = rfs_verify(&out.out_dir, None, None).unwrap_err();
    assert!(
        e.contains("bundle: bundled file bundle/lib/greet.rhai has sha256"),
        "{e}"
    );
}

/// Regression (bundle leaked a secret): a secret the run learns that is
/// written in the script itself is redacted in the bundled copy too; the
/// new digest is journaled, so the bundle still verifies, and replay
/// refuses a script that no longer is what ran.
#[test]
fn bundled_script_holding_a_secret_is_redacted_and_still_verifies() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"step("s", "true", #{ env: #{ API_TOKEN: "tok-abcdef-123456" } });"#,
    );
    out.assert_code(0);
    for f in walk(&out.out_dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !text.contains("tok-abcdef-123456"),
            "secret in {}",
            f.display()
        );
    }
    assert_eq!(out.entries("bundle.redacted").len(), 1);
    let ok = rfs_verify(&out.out_dir, None, None).unwrap();
    assert!(ok.contains("ok: bundle:"), "{ok}");
    let o = rfs
        .cmd(repo.path())
        .arg("replay")
        .arg(&out.out_dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("was redacted in the bundle"));
}

/// Setup once, fork per proof (#36), signed: each proof's bundle carries
/// the setup's journal with its signature, checked against the same
/// allowed signers; a setup signature by another key, or a proof journal
/// re-chained to name another setup head (EVIDENCE.md drawn again, as a
/// forger would), fails the checkpoint link.
#[test]
fn a_signed_suites_proof_carries_the_setups_signature_and_a_forged_link_fails() {
    let rfs = Rfs::new(Prov::Local);
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path(), "k", "");
    let other = keygen(keys.path(), "other", "");
    let ok = allowed(keys.path(), "me@rfs.test", &key);
    let repo = Repo::new();
    repo.write(
        "proofs/_setup.rhai",
        "sync_source();\nstep(\"s\", \"echo s > s.txt\");",
    );
    repo.write(
        "proofs/p.rhai",
        "sync_source();\nstep(\"p\", \"cat s.txt\");",
    );
    repo.commit("suite");
    let suite = rfs.state.path().join("suite");
    let out = rfs
        .cmd(repo.path())
        .args(["test", "--setup", "proofs/_setup.rhai", "--sign-key"])
        .arg(&key)
        .arg("--out")
        .arg(&suite)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b = suite.join("proofs-p");
    assert!(b.join("setup/journal.sig").is_file());
    let v = rfs_verify(&b, Some(&ok), Some("me@rfs.test")).unwrap();
    assert!(v.contains("setup signature: valid SSH signature"), "{v}");
    // The setup's signature by another key.
    let copy = rfs.state.path().join("copy");
    copy_tree(&b, &copy);
    let sig = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "rfs", "-f"])
        .arg(&other)
        .stdin(std::fs::File::open(copy.join("setup/journal.jsonl")).unwrap())
        .output()
        .unwrap();
    std::fs::write(copy.join("setup/journal.sig"), &sig.stdout).unwrap();
    let e = rfs_verify(&copy, Some(&ok), Some("me@rfs.test")).unwrap_err();
    assert!(e.contains("checkpoint link"), "{e}");
    // An unsigned proof bundle whose journal names another setup head,
    // re-chained with its views drawn again.
    let forged = rfs.state.path().join("forged");
    copy_tree(&b, &forged);
    for f in [
        "journal.sig",
        "setup/journal.sig",
        "attestation.intoto.json",
    ] {
        let _ = std::fs::remove_file(forged.join(f));
    }
    let j = forged.join("journal.jsonl");
    let text = std::fs::read_to_string(&j).unwrap();
    let head = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "placement.forked")
        .unwrap()["payload"]["setup_journal_head"]
        .as_str()
        .unwrap()
        .to_owned();
    let text: String = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "run.start" {
                v["payload"].as_object_mut().unwrap().remove("signing_key");
            }
            format!("{}\n", serde_json::to_string(&v).unwrap())
        })
        .collect::<String>()
        .replace(&head, &"f".repeat(64));
    std::fs::write(&j, text).unwrap();
    rechain(&j);
    let e = rfs_verify(&forged, None, None).unwrap_err();
    assert!(e.contains("checkpoint link"), "{e}");
}

fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

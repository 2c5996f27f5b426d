//! The script-facing functions: `sandbox()`, `sync_source()`, `step()`,
//! `assert()`, `arg()`, `fail()`. Each converts its options, calls the
//! runtime and turns runtime errors into script errors at the call site.

use std::collections::BTreeMap;
use std::sync::Arc;

use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext, Position};

use super::options::{OptionError, Opts};
use crate::runtime::{Run, SandboxOptions, SourcePin, StepOptions, StepResult};
use rfs_evidence::error::Error;
use rfs_sandbox::source::{SourceOptions, SubmodulePolicy};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// The script's handle on the run's one sandbox.
#[derive(Clone)]
pub(crate) struct SandboxHandle {
    run: Arc<Run>,
}

/// A runtime error as a script error at `pos`. Refusals and failures are
/// catchable; interruption and internal errors end the script.
pub(crate) fn to_rhai(run: &Run, e: Error, pos: Position) -> Box<EvalAltResult> {
    match e {
        Error::Interrupted => Box::new(EvalAltResult::ErrorTerminated("interrupted".into(), pos)),
        Error::Internal(_) => {
            let msg = e.to_string();
            run.state().fatal = Some(msg.clone());
            Box::new(EvalAltResult::ErrorTerminated(msg.into(), pos))
        }
        Error::Refused(ref m) => {
            // Every refusal is a journal fact with its reason, whichever
            // check raised it (the run's end only says `refused`).
            let reason = run.state().redactor.redact_str(m);
            let _ = run.record(rfs_evidence::events::Event::Refused { reason });
            // The refusal crosses the script boundary as this very value:
            // the exit code is decided by its identity, never by its text.
            let value = rhai::ImmutableString::from(e.to_string());
            run.state().refusals.push(value.clone());
            Box::new(EvalAltResult::ErrorRuntime(value.into(), pos))
        }
        other => Box::new(EvalAltResult::ErrorRuntime(other.to_string().into(), pos)),
    }
}

/// A catchable script error at `pos` (bad options, failed assertions).
pub(super) fn script_error(msg: impl std::fmt::Display, pos: Position) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(msg.to_string().into(), pos))
}

fn pin_map(p: &SourcePin) -> Map {
    let mut m = Map::new();
    m.insert("commit".into(), p.commit.clone().into());
    m.insert("tree_digest".into(), p.tree_digest.clone().into());
    m.insert("archive_sha256".into(), p.archive_sha256.clone().into());
    m.insert("files".into(), (p.files as i64).into());
    m.insert("workdir".into(), p.workdir.clone().into());
    m
}

fn step_map(r: &StepResult) -> Map {
    let mut m = Map::new();
    m.insert(
        "exit".into(),
        r.exit
            .map(|e| Dynamic::from(e as i64))
            .unwrap_or(Dynamic::UNIT),
    );
    m.insert("stdout".into(), r.stdout.clone().into());
    m.insert("stderr".into(), r.stderr.clone().into());
    m.insert("duration_ms".into(), (r.duration_ms as i64).into());
    m.insert("attempts".into(), (r.attempts as i64).into());
    m.insert("timed_out".into(), r.timed_out.into());
    m.insert("ok".into(), r.ok.into());
    m
}

fn sandbox_opts(map: Map) -> Result<SandboxOptions, OptionError> {
    let mut o = Opts::new("sandbox()", map);
    let image = o.string("image")?;
    let snapshot = o.string("snapshot")?;
    let labels = o.string_map("labels")?.into_iter().collect();
    let isolation = o.string("isolation")?;
    let isolation = isolation
        .map(|m| rfs_sandbox::provider::isolation::IsolationMode::parse(&m))
        .transpose()
        .map_err(|e| OptionError::Isolation { reason: e })?;
    let network = o
        .value("network")
        .map(|v| super::network_option::network_value(&v))
        .transpose()
        .map_err(|reason| OptionError::Network { reason })?;
    let caches = o.string_map("caches")?.into_iter().collect();
    // Known, to be refused naming the flag (not as a typo).
    let mount_ro = o.value("mount_ro").is_some();
    let mut limits = rfs_sandbox::provider::limits::Limits::default();
    for kind in rfs_sandbox::provider::limits::LimitKind::ALL {
        if let Some(v) = o.value(kind.key()) {
            let v = limit_value(kind, &v).map_err(|reason| OptionError::Limit { reason })?;
            match kind {
                rfs_sandbox::provider::limits::LimitKind::Pids => limits.pids = Some(v),
                rfs_sandbox::provider::limits::LimitKind::Memory => limits.memory = Some(v),
                rfs_sandbox::provider::limits::LimitKind::Cpus => limits.cpus = Some(v),
                rfs_sandbox::provider::limits::LimitKind::Disk => limits.disk = Some(v),
            }
        }
    }
    o.finish()?;
    Ok(SandboxOptions {
        image,
        snapshot,
        labels,
        isolation,
        network,
        limits,
        caches,
        mount_ro,
    })
}

/// `rfs check` (and `rfs run`, before anything runs): the literal limit
/// values of a `sandbox(#{ … })` map that would be refused.
pub(crate) fn limit_literals(
    entries: &[(rhai::Ident, rhai::Expr)],
) -> Vec<super::problem::Problem> {
    let mut out = vec![];
    for (k, v) in entries {
        let Some(kind) = rfs_sandbox::provider::limits::LimitKind::ALL
            .into_iter()
            .find(|l| l.key() == k.name.as_str())
        else {
            continue;
        };
        let Some(value) = v.get_literal_value(None) else {
            continue;
        };
        if let Err(reason) = limit_value(kind, &value) {
            out.push(super::problem::Problem {
                pos: v.start_position(),
                message: OptionError::Limit { reason }.to_string(),
                help: None,
            });
        }
    }
    out
}

/// A limit's value as a script gives it: `pids` an integer, `memory` a
/// size as Docker reads it (`"512M"`) or a number of bytes, `cpus` a
/// number (`1.5`). Also judged by `rfs check` on literal maps.
pub(crate) fn limit_value(
    kind: rfs_sandbox::provider::limits::LimitKind,
    v: &Dynamic,
) -> Result<u64, rfs_sandbox::provider::limits::LimitsError> {
    use rfs_sandbox::provider::limits::{self as l, LimitKind, LimitsError};
    let wrong = |want: &str| LimitsError::Malformed {
        kind,
        why: format!("must be {want}, not {}", v.type_name()),
    };
    match kind {
        LimitKind::Pids => {
            let n = v
                .as_int()
                .map_err(|_| wrong("an integer number of processes"))?;
            l::check(kind, u64::try_from(n).unwrap_or(0))
        }
        LimitKind::Memory | LimitKind::Disk => {
            if v.is_string() {
                let text = v.clone().into_string().expect("string");
                if kind == LimitKind::Disk {
                    l::parse_disk(&text)
                } else {
                    l::parse_memory(&text)
                }
            } else {
                let n = v
                    .as_int()
                    .map_err(|_| wrong("a size such as \"512M\" or a number of bytes"))?;
                l::check(kind, u64::try_from(n).unwrap_or(0))
            }
        }
        LimitKind::Cpus => {
            let c = v
                .as_float()
                .or_else(|_| v.as_int().map(|i| i as f64))
                .map_err(|_| wrong("a number of cpus such as 1.5"))?;
            l::parse_cpus(c)
        }
    }
}

fn source_opts(run: &Run, map: Map) -> Result<SourceOptions, OptionError> {
    let mut o = Opts::new("sync_source()", map);
    let mut s = SourceOptions::new(run.cfg.invocation_dir.clone());
    if let Some(r) = o.string("repo")? {
        let p = std::path::Path::new(&r);
        s.repo = if p.is_absolute() {
            p.to_path_buf()
        } else {
            run.cfg.invocation_dir.join(p)
        };
    }
    if let Some(r) = o.string("rev")? {
        s.rev = r;
    }
    s.subdir = o.string("path")?;
    s.allow_dirty = o.boolean("allow_dirty")?.unwrap_or(false);
    s.submodules = match o.string("submodules")?.as_deref() {
        None | Some("refuse") => SubmodulePolicy::Refuse,
        Some("include") => SubmodulePolicy::Include,
        Some(other) => {
            return Err(OptionError::BadValue {
                func: "sync_source()",
                key: "submodules",
                want: "\"refuse\" or \"include\"",
                got: format!("{other:?}"),
            })
        }
    };
    if let Some(d) = o.string("dest")? {
        s.dest = d;
    }
    o.finish()?;
    Ok(s)
}

fn step_opts(map: Map) -> Result<StepOptions, OptionError> {
    let mut o = Opts::new("step()", map);
    let cwd = o.string("cwd")?;
    let env = o.string_map("env")?;
    let timeout = o.seconds("timeout")?;
    let retries = o.int("retries")?.unwrap_or(0);
    if !(0..=100).contains(&retries) {
        return Err(OptionError::BadValue {
            func: "step()",
            key: "retries",
            want: "between 0 and 100",
            got: retries.to_string(),
        });
    }
    let allow_failure = o.boolean("allow_failure")?.unwrap_or(false);
    o.finish()?;
    Ok(StepOptions {
        cwd,
        env,
        timeout,
        retries: retries as u32,
        allow_failure,
    })
}

/// Register every function on `engine` for `run`.
pub(crate) fn register(engine: &mut Engine, run: Arc<Run>, vars: BTreeMap<String, String>) {
    register_sandbox_type(engine);
    register_sandbox(engine, &run);
    register_sync_source(engine, &run);
    register_step(engine, &run);
    register_artifacts(engine, &run);
    register_checks(engine);
    register_args(engine, vars);
}

/// The `Sandbox` type `sandbox()` returns: its `id`, `provider` and
/// `workdir`, and how it prints.
fn register_sandbox_type(engine: &mut Engine) {
    engine.register_type_with_name::<SandboxHandle>("Sandbox");
    engine.register_get("id", |h: &mut SandboxHandle| -> RhaiResult<String> {
        h.run
            .ensure_sandbox()
            .map(|s| s.id)
            .map_err(|e| to_rhai(&h.run, e, Position::NONE))
    });
    engine.register_get("provider", |h: &mut SandboxHandle| {
        h.run.cfg.provider.name().to_owned()
    });
    engine.register_get("workdir", |h: &mut SandboxHandle| -> Dynamic {
        h.run
            .state()
            .source
            .as_ref()
            .map(|s| Dynamic::from(s.pin.workdir.clone()))
            .unwrap_or(Dynamic::UNIT)
    });
    engine.register_fn("to_string", |h: &mut SandboxHandle| {
        let st = h.run.state();
        match &st.sandbox {
            Some(s) => format!("sandbox {} ({})", s.id, h.run.cfg.provider.name()),
            None => format!(
                "sandbox (not yet provisioned, {})",
                h.run.cfg.provider.name()
            ),
        }
    });
}

/// `sandbox()` and `sandbox(#{…})`.
fn register_sandbox(engine: &mut Engine, run: &Arc<Run>) {
    let r = run.clone();
    engine.register_fn(
        "sandbox",
        move |ctx: NativeCallContext| -> RhaiResult<SandboxHandle> {
            r.sandbox_options(SandboxOptions::default())
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            Ok(SandboxHandle { run: r.clone() })
        },
    );
    let r = run.clone();
    engine.register_fn(
        "sandbox",
        move |ctx: NativeCallContext, opts: Map| -> RhaiResult<SandboxHandle> {
            let o = sandbox_opts(opts).map_err(|m| script_error(m, ctx.call_position()))?;
            r.sandbox_options(o)
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            Ok(SandboxHandle { run: r.clone() })
        },
    );
}

/// `sync_source()` and `sync_source(#{…})`.
fn register_sync_source(engine: &mut Engine, run: &Arc<Run>) {
    let r = run.clone();
    engine.register_fn(
        "sync_source",
        move |ctx: NativeCallContext| -> RhaiResult<Map> {
            let o = SourceOptions::new(r.cfg.invocation_dir.clone());
            r.sync_source(o, false)
                .map(|p| pin_map(&p))
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
    let r = run.clone();
    engine.register_fn(
        "sync_source",
        move |ctx: NativeCallContext, opts: Map| -> RhaiResult<Map> {
            let o = source_opts(&r, opts).map_err(|m| script_error(m, ctx.call_position()))?;
            r.sync_source(o, false)
                .map(|p| pin_map(&p))
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
}

/// `step(name, cmd)` and `step(name, cmd, #{…})`.
fn register_step(engine: &mut Engine, run: &Arc<Run>) {
    let r = run.clone();
    engine.register_fn(
        "step",
        move |ctx: NativeCallContext, name: &str, cmd: &str| -> RhaiResult<Map> {
            r.step(name, cmd, StepOptions::default())
                .map(|x| step_map(&x))
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
    let r = run.clone();
    engine.register_fn(
        "step",
        move |ctx: NativeCallContext, name: &str, cmd: &str, opts: Map| -> RhaiResult<Map> {
            let o = step_opts(opts).map_err(|m| script_error(m, ctx.call_position()))?;
            r.step(name, cmd, o)
                .map(|x| step_map(&x))
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
}

fn collected_map(c: &crate::runtime::artifacts::Collected) -> Map {
    let mut m = Map::new();
    m.insert("files".into(), (c.files as i64).into());
    m.insert("bytes".into(), (c.bytes as i64).into());
    m.insert("path".into(), c.path.clone().into());
    m.insert("absent".into(), c.absent.into());
    m
}

/// `collect(path)`, `collect(path, #{…})`, `put(local, path)` and
/// `checkpoint(name)`.
fn register_artifacts(engine: &mut Engine, run: &Arc<Run>) {
    let r = run.clone();
    engine.register_fn(
        "collect",
        move |ctx: NativeCallContext, path: &str| -> RhaiResult<Map> {
            r.collect(path, Default::default())
                .map(|c| collected_map(&c))
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
    let r = run.clone();
    engine.register_fn(
        "collect",
        move |ctx: NativeCallContext, path: &str, opts: Map| -> RhaiResult<Map> {
            let mut o = Opts::new("collect()", opts);
            let c = (|| {
                let c = crate::runtime::artifacts::CollectOptions {
                    max_bytes: o.int("max_bytes")?,
                    junit: o.boolean("junit")?.unwrap_or(false),
                    optional: o.boolean("optional")?.unwrap_or(false),
                };
                o.finish().map(|_| c)
            })()
            .map_err(|m| script_error(m, ctx.call_position()))?;
            r.collect(path, c)
                .map(|c| collected_map(&c))
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
    let r = run.clone();
    engine.register_fn(
        "checkpoint",
        move |ctx: NativeCallContext, name: &str| -> RhaiResult<String> {
            r.checkpoint(name, false)
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
    let r = run.clone();
    engine.register_fn(
        "put",
        move |ctx: NativeCallContext, local: &str, path: &str| -> RhaiResult<Map> {
            let f = r
                .put(local, path)
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            let mut m = Map::new();
            m.insert("sha256".into(), f.sha256.into());
            m.insert("bytes".into(), (f.bytes as i64).into());
            m.insert("path".into(), f.path.into());
            Ok(m)
        },
    );
}

/// `trimmed()`, `assert()` and `fail()`, which need no run.
fn register_checks(engine: &mut Engine) {
    // Rhai's `trim()` trims in place and returns nothing; scripts often
    // want the trimmed value in an expression.
    engine.register_fn("trimmed", |s: rhai::ImmutableString| s.trim().to_owned());
    engine.register_fn(
        "assert",
        |ctx: NativeCallContext, cond: bool| -> RhaiResult<()> {
            if cond {
                Ok(())
            } else {
                Err(script_error("assertion failed", ctx.call_position()))
            }
        },
    );
    engine.register_fn(
        "assert",
        |ctx: NativeCallContext, cond: bool, msg: &str| -> RhaiResult<()> {
            if cond {
                Ok(())
            } else {
                Err(script_error(
                    format!("assertion failed: {msg}"),
                    ctx.call_position(),
                ))
            }
        },
    );
    engine.register_fn(
        "fail",
        |ctx: NativeCallContext, msg: &str| -> RhaiResult<()> {
            Err(script_error(msg.to_owned(), ctx.call_position()))
        },
    );
}

/// `arg(name)` and `arg(name, default)`: the `--var` values.
fn register_args(engine: &mut Engine, vars: BTreeMap<String, String>) {
    let v = Arc::new(vars);
    let vv = v.clone();
    engine.register_fn(
        "arg",
        move |ctx: NativeCallContext, name: &str| -> RhaiResult<String> {
            vv.get(name).cloned().ok_or_else(|| {
                script_error(
                    format!("variable `{name}` was not given (pass --var {name}=VALUE)"),
                    ctx.call_position(),
                )
            })
        },
    );
    engine.register_fn("arg", move |name: &str, default: &str| -> String {
        v.get(name).cloned().unwrap_or_else(|| default.to_owned())
    });
}

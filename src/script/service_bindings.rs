//! Script functions for services: `service(name, #{ image, env, ready,
//! cmd })` and the `Service` handle (`alive`, `logs`, `stop`).

use std::sync::Arc;

use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext};

use super::bindings::{script_error, to_rhai};
use super::options::Opts;
use crate::runtime::service::{Service, ServiceOptions};
use crate::runtime::Run;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// The script's handle on one service.
#[derive(Clone)]
pub(crate) struct ServiceHandle {
    run: Arc<Run>,
    s: Arc<Service>,
}

/// `cmd`: an array of strings (the command and its arguments) or one
/// string (run by the image's `/bin/sh -c`).
fn cmd_value(v: Dynamic) -> Result<Vec<String>, String> {
    if let Some(s) = v.clone().try_cast::<String>() {
        return Ok(vec!["/bin/sh".into(), "-c".into(), s]);
    }
    let bad = || "service(): `cmd` must be a string or an array of strings".to_owned();
    let arr = v.try_cast::<rhai::Array>().ok_or_else(bad)?;
    let argv: Vec<String> = arr
        .into_iter()
        .map(|a| a.try_cast::<String>().ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    if argv.is_empty() || argv.iter().any(|a| a.contains('\0')) {
        return Err("service(): `cmd` must not be empty nor hold a NUL byte".into());
    }
    Ok(argv)
}

fn service_opts(map: Map) -> Result<ServiceOptions, String> {
    let mut o = Opts::new("service()", map);
    let e = |m: super::options::OptionError| m.to_string();
    let image = o
        .string("image")
        .map_err(e)?
        .ok_or("service(): `image` is required (an image present on the docker engine)")?;
    let env = o.string_map("env").map_err(e)?;
    let cmd = o.value("cmd").map(cmd_value).transpose()?;
    let ready = match o.value("ready") {
        None => None,
        Some(v) => {
            let m = v
                .try_cast::<Map>()
                .ok_or("service(): `ready` must be a map: #{ port: N, timeout: S } or #{ line: \"…\", timeout: S }")?;
            Some(
                super::spawn_bindings::wait_opts(m)
                    .map_err(|m| m.replace("wait_for()", "service(): `ready`"))?,
            )
        }
    };
    o.finish().map_err(e)?;
    Ok(ServiceOptions {
        image,
        env,
        cmd,
        ready,
    })
}

/// Register `service()` and the `Service` handle for `run`.
pub(crate) fn register(engine: &mut Engine, run: Arc<Run>) {
    engine.register_type_with_name::<ServiceHandle>("Service");
    engine.register_fn(
        "service",
        move |ctx: NativeCallContext, name: &str, opts: Map| -> RhaiResult<ServiceHandle> {
            let o = service_opts(opts).map_err(|m| script_error(m, ctx.call_position()))?;
            let s = run
                .service(name, o)
                .map_err(|e| to_rhai(&run, e, ctx.call_position()))?;
            Ok(ServiceHandle {
                run: run.clone(),
                s,
            })
        },
    );
    engine.register_fn("alive", |h: &mut ServiceHandle| h.s.alive());
    engine.register_fn("logs", |h: &mut ServiceHandle| h.s.logs());
    engine.register_fn(
        "stop",
        |ctx: NativeCallContext, h: &mut ServiceHandle| -> RhaiResult<Map> {
            let e = h
                .run
                .stop_service(&h.s)
                .map_err(|e| to_rhai(&h.run, e, ctx.call_position()))?;
            let mut m = Map::new();
            m.insert(
                "exit".into(),
                e.exit
                    .map(|c| Dynamic::from(c as i64))
                    .unwrap_or(Dynamic::UNIT),
            );
            m.insert("gone".into(), e.gone.into());
            Ok(m)
        },
    );
    engine.register_get("name", |h: &mut ServiceHandle| h.s.name.clone());
    engine.register_get("container_id", |h: &mut ServiceHandle| {
        h.s.container_id.clone()
    });
    engine.register_fn("to_string", |h: &mut ServiceHandle| {
        format!("service `{}`", h.s.name)
    });
}

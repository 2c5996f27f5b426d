//! The primitives' declaration against the run engine's real
//! bindings (a unit test: it needs the crate-private runtime).

/// Every function the run's engine registers is in the lint's table, with
/// every argument count it takes: a new binding cannot be called an
/// unknown function by `rfs check`.
#[test]
fn lint_table_covers_every_run_binding() {
    use crate::script::primitives::find;
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("RFS_STATE_DIR", state.path());
    let script = state.path().join("s.rhai");
    std::fs::write(&script, "").unwrap();
    let settings = crate::settings::RunSettings::from_args(crate::settings::RunArgs {
        script: script.clone(),
        provider: Some("local".into()),
        out: Some(state.path().join("out")),
        ..Default::default()
    })
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = crate::lifecycle::start::config(&settings, None, script.clone());
    let run = crate::runtime::Run::start(
        cfg,
        rt.handle().clone(),
        std::sync::Arc::new(rfs_evidence::events::Silent),
        &Default::default(),
    )
    .unwrap();
    let loaded = crate::script::Script::load(&script).unwrap();
    let engine = crate::script::run_engine(&run, &loaded, Default::default()).unwrap();
    let mut seen = 0;
    for sig in engine.gen_fn_signatures(false) {
        let (name, rest) = sig.split_once('(').unwrap();
        if name.starts_with("get$") || name.starts_with("set$") {
            continue;
        }
        let params = rest.rsplit_once(')').unwrap().0;
        let n = if params.trim().is_empty() {
            0
        } else {
            params.split(',').count()
        };
        let entry =
            find(name).unwrap_or_else(|| panic!("{sig}: `{name}` missing from script::primitives"));
        assert!(
            entry.arities.contains(&n),
            "{sig}: arity {n} missing from script::primitives"
        );
        seen += 1;
    }
    assert!(seen >= 20, "{seen}");
}

//! `sandbox(#{ network })`: `false`, `true`, `"host"` or
//! `#{ allow: [...] }` as a [`NetworkPolicy`], checked before anything
//! runs (`rfs check` included, with the script span).

use rhai::Dynamic;

use rfs_sandbox::network::NetworkPolicy;

/// The policy a `network` value asks for, or why it is refused.
pub(crate) fn network_value(v: &Dynamic) -> Result<NetworkPolicy, String> {
    const WANT: &str = "must be false, true, \"host\" or #{ allow: [\"name\", \"*.domain\", \"10.0.0.0/8\", \"host:8080\", ...] }";
    if let Ok(b) = v.as_bool() {
        return Ok(if b {
            NetworkPolicy::Public
        } else {
            NetworkPolicy::Off
        });
    }
    if v.is_string() {
        let s = v.clone().into_string().unwrap_or_default();
        return match s.as_str() {
            "host" => Ok(NetworkPolicy::Host),
            other => Err(format!("{WANT}, not {other:?}")),
        };
    }
    let Some(map) = v.clone().try_cast::<rhai::Map>() else {
        return Err(format!("{WANT}, not a {}", v.type_name()));
    };
    if let Some(k) = map.keys().find(|k| k.as_str() != "allow") {
        return Err(format!("{WANT}; unknown key `{k}`"));
    }
    let Some(list) = map.get("allow") else {
        return Err(format!("{WANT}; the map has no `allow`"));
    };
    let Some(list) = list.clone().try_cast::<rhai::Array>() else {
        return Err(format!(
            "`allow` must be an array of strings, not a {}",
            list.type_name()
        ));
    };
    let mut entries = vec![];
    for e in list {
        if !e.is_string() {
            return Err(format!(
                "`allow` entries must be strings, not a {}",
                e.type_name()
            ));
        }
        entries.push(e.into_string().unwrap_or_default());
    }
    NetworkPolicy::allow(&entries).map_err(|e| e.to_string())
}

/// `rfs check` (and `rfs run`, before anything runs): a literal `network`
/// value of a `sandbox(#{ … })` map that would be refused.
pub(crate) fn network_literals(
    entries: &[(rhai::Ident, rhai::Expr)],
) -> Vec<super::problem::Problem> {
    let mut out = vec![];
    for (k, v) in entries {
        if k.name.as_str() != "network" {
            continue;
        }
        let Some(value) = v.get_literal_value(None) else {
            continue;
        };
        if let Err(reason) = network_value(&value) {
            out.push(super::problem::Problem {
                pos: v.start_position(),
                message: super::options::OptionError::Network { reason }.to_string(),
                help: None,
            });
        }
    }
    out
}

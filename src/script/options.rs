//! Turning a Rhai option map into typed options. Unknown keys and wrong
//! types are errors: a typo such as `timout` must not be silently ignored.

use std::collections::BTreeSet;
use std::time::Duration;

use rhai::{Dynamic, Map};

/// The longest duration a script may ask for (7 days): a step timeout,
/// a wait. Longer values are option errors, never a panic or an overflow
/// deeper down.
pub(crate) const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// Why a script's options were refused (before anything ran).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum OptionError {
    /// A duration that is not a number.
    #[error("{what} must be a number of seconds, not {got}")]
    NotSeconds { what: String, got: &'static str },
    /// A duration outside (0, [`MAX_SECONDS`]].
    #[error("{what} must be > 0 seconds and at most {MAX_SECONDS} (7 days), not {secs}")]
    SecondsOutOfRange { what: String, secs: f64 },
    /// An option of the wrong type.
    #[error("{func}: option `{key}` must be {want}, not {got}")]
    WrongType {
        func: &'static str,
        key: String,
        want: &'static str,
        got: &'static str,
    },
    /// A map option with a map, array or unit value.
    #[error("{func}: `{key}.{entry}` must be a string, number or bool")]
    NotScalar {
        func: &'static str,
        key: String,
        entry: String,
    },
    /// Keys no option of the function has (typos).
    #[error(
        "{func}: unknown option(s) {} (known: {})",
        ticked(unknown),
        ticked(known)
    )]
    Unknown {
        func: &'static str,
        unknown: Vec<String>,
        known: Vec<String>,
    },
    /// `sandbox(#{ isolation })` names no isolation mode.
    #[error("sandbox(): option `isolation`: {reason}")]
    Isolation {
        reason: rfs_sandbox::provider::isolation::IsolationError,
    },
    /// `sandbox(#{ network })` with a malformed value (#34).
    #[error("sandbox(): option `network`: {reason}")]
    Network { reason: String },
    /// `sandbox(#{ pids, memory, cpus })` with a malformed value.
    #[error("sandbox(): option {reason}")]
    Limit {
        reason: rfs_sandbox::provider::limits::LimitsError,
    },
    /// An option of the right type with a value outside its set or range.
    #[error("{func}: {key} must be {want}, not {got}")]
    BadValue {
        func: &'static str,
        key: &'static str,
        want: &'static str,
        got: String,
    },
}

fn ticked(keys: &[String]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A number (int or float) of seconds in (0, [`MAX_SECONDS`]]; `what`
/// names the option for the message.
pub(crate) fn seconds_value(what: &str, v: &Dynamic) -> Result<Duration, OptionError> {
    let secs = v
        .as_float()
        .or_else(|_| v.as_int().map(|i| i as f64))
        .map_err(|_| OptionError::NotSeconds {
            what: what.to_owned(),
            got: v.type_name(),
        })?;
    if !(secs > 0.0 && secs <= MAX_SECONDS) {
        return Err(OptionError::SecondsOutOfRange {
            what: what.to_owned(),
            secs,
        });
    }
    Ok(Duration::from_secs_f64(secs))
}

/// An option map of a primitive being read: it takes exactly the keys
/// the primitive declares ([`super::primitives`]); call [`Opts::finish`]
/// to reject the others.
pub(crate) struct Opts {
    what: &'static str,
    known: &'static [&'static str],
    map: Map,
    seen: BTreeSet<String>,
}

impl Opts {
    /// The option map of primitive `what` (`"step()"`).
    pub(crate) fn new(what: &'static str, map: Map) -> Self {
        let known = super::primitives::option_keys(what.trim_end_matches("()"));
        Opts {
            what,
            known,
            map,
            seen: BTreeSet::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<Dynamic> {
        // A binding reads only what its primitive declares.
        debug_assert!(
            self.known.contains(&key),
            "{}: option `{key}` is not declared in script::primitives",
            self.what
        );
        self.seen.insert(key.to_owned());
        self.map.get(key).cloned().filter(|v| !v.is_unit())
    }

    fn wrong(&self, key: &str, want: &'static str, v: &Dynamic) -> OptionError {
        OptionError::WrongType {
            func: self.what,
            key: key.to_owned(),
            want,
            got: v.type_name(),
        }
    }

    pub(crate) fn string(&mut self, key: &str) -> Result<Option<String>, OptionError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.is_string() => Ok(Some(v.into_string().expect("string"))),
            Some(v) => Err(self.wrong(key, "a string", &v)),
        }
    }

    pub(crate) fn boolean(&mut self, key: &str) -> Result<Option<bool>, OptionError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .map_err(|_| self.wrong(key, "true or false", &v)),
        }
    }

    /// The raw value of `key`, if given (for options of several types).
    pub(crate) fn value(&mut self, key: &str) -> Option<Dynamic> {
        self.get(key)
    }

    pub(crate) fn int(&mut self, key: &str) -> Result<Option<i64>, OptionError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_int()
                .map(Some)
                .map_err(|_| self.wrong(key, "an integer", &v)),
        }
    }

    /// A number (int or float) of seconds, > 0 and at most
    /// [`MAX_SECONDS`].
    pub(crate) fn seconds(&mut self, key: &str) -> Result<Option<Duration>, OptionError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        seconds_value(&format!("{}: option `{key}`", self.what), &v).map(Some)
    }

    /// A map of string → string (values may be any printable scalar).
    pub(crate) fn string_map(&mut self, key: &str) -> Result<Vec<(String, String)>, OptionError> {
        let Some(v) = self.get(key) else {
            return Ok(vec![]);
        };
        let Some(m) = v.clone().try_cast::<Map>() else {
            return Err(self.wrong(key, "a map", &v));
        };
        let mut out = vec![];
        for (k, v) in m {
            if v.is_map() || v.is_array() || v.is_unit() {
                return Err(OptionError::NotScalar {
                    func: self.what,
                    key: key.to_owned(),
                    entry: k.to_string(),
                });
            }
            out.push((k.to_string(), v.to_string()));
        }
        Ok(out)
    }

    /// Refuse keys the primitive does not declare.
    pub(crate) fn finish(self) -> Result<(), OptionError> {
        // Every declared key is honoured: a binding that stopped reading
        // one would ignore it silently.
        debug_assert!(
            self.known.iter().all(|k| self.seen.contains(*k)),
            "{}: declared options not read: {:?}",
            self.what,
            self.known
                .iter()
                .filter(|k| !self.seen.contains(**k))
                .collect::<Vec<_>>()
        );
        let unknown: Vec<String> = self
            .map
            .keys()
            .filter(|k| !self.known.contains(&k.as_str()))
            .map(|k| k.to_string())
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(OptionError::Unknown {
                func: self.what,
                unknown,
                known: self.known.iter().map(|k| k.to_string()).collect(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_errors_are_typed_and_name_the_option() {
        let e = seconds_value("step(): option `timeout`", &Dynamic::from_float(1e300));
        assert!(matches!(e, Err(OptionError::SecondsOutOfRange { secs, .. }) if secs == 1e300));
        let e = seconds_value("wait_exit: the timeout", &Dynamic::from("5"));
        assert!(
            matches!(&e, Err(OptionError::NotSeconds { got, .. }) if got.contains("string")),
            "{e:?}"
        );

        let mut map = Map::new();
        map.insert("timout".into(), Dynamic::from_int(5));
        map.insert("cwd".into(), Dynamic::from_int(1));
        let mut o = Opts::new("step()", map);
        let e = o.string("cwd").unwrap_err();
        assert_eq!(
            e.to_string(),
            "step(): option `cwd` must be a string, not i64"
        );
        for key in ["timeout", "env", "retries", "allow_failure"] {
            let _ = o.string(key);
        }
        assert_eq!(
            o.finish(),
            Err(OptionError::Unknown {
                func: "step()",
                unknown: vec!["timout".into()],
                known: ["cwd", "env", "timeout", "retries", "allow_failure"]
                    .map(String::from)
                    .to_vec(),
            })
        );
    }
}

//! Turning a Rhai option map into typed options. Unknown keys and wrong
//! types are errors: a typo such as `timout` must not be silently ignored.

use std::collections::BTreeSet;
use std::time::Duration;

use rhai::{Dynamic, Map};

/// An option map being read; call [`Opts::finish`] to reject leftovers.
pub struct Opts {
    what: &'static str,
    map: Map,
    seen: BTreeSet<String>,
}

impl Opts {
    pub fn new(what: &'static str, map: Map) -> Self {
        Opts {
            what,
            map,
            seen: BTreeSet::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<Dynamic> {
        self.seen.insert(key.to_owned());
        self.map.get(key).cloned().filter(|v| !v.is_unit())
    }

    fn wrong(&self, key: &str, want: &str, v: &Dynamic) -> String {
        format!(
            "{}: option `{key}` must be {want}, not {}",
            self.what,
            v.type_name()
        )
    }

    pub fn string(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.is_string() => Ok(Some(v.into_string().expect("string"))),
            Some(v) => Err(self.wrong(key, "a string", &v)),
        }
    }

    pub fn boolean(&mut self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .map_err(|_| self.wrong(key, "true or false", &v)),
        }
    }

    pub fn int(&mut self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_int()
                .map(Some)
                .map_err(|_| self.wrong(key, "an integer", &v)),
        }
    }

    /// A number (int or float) of seconds, > 0.
    pub fn seconds(&mut self, key: &str) -> Result<Option<Duration>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let secs = v
            .as_float()
            .or_else(|_| v.as_int().map(|i| i as f64))
            .map_err(|_| self.wrong(key, "a number of seconds", &v))?;
        if !(secs > 0.0 && secs.is_finite()) {
            return Err(format!("{}: option `{key}` must be > 0 seconds", self.what));
        }
        Ok(Some(Duration::from_secs_f64(secs)))
    }

    /// A map of string → string (values may be any printable scalar).
    pub fn string_map(&mut self, key: &str) -> Result<Vec<(String, String)>, String> {
        let Some(v) = self.get(key) else {
            return Ok(vec![]);
        };
        let Some(m) = v.clone().try_cast::<Map>() else {
            return Err(self.wrong(key, "a map", &v));
        };
        let mut out = vec![];
        for (k, v) in m {
            if v.is_map() || v.is_array() || v.is_unit() {
                return Err(format!(
                    "{}: `{key}.{k}` must be a string, number or bool",
                    self.what
                ));
            }
            out.push((k.to_string(), v.to_string()));
        }
        Ok(out)
    }

    /// A raw value (for options with their own shape).
    pub fn raw(&mut self, key: &str) -> Option<Dynamic> {
        self.get(key)
    }

    /// Refuse keys nobody asked for.
    pub fn finish(self) -> Result<(), String> {
        let unknown: Vec<_> = self
            .map
            .keys()
            .filter(|k| !self.seen.contains(k.as_str()))
            .map(|k| format!("`{k}`"))
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: unknown option(s) {} (known: {})",
                self.what,
                unknown.join(", "),
                self.seen
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}

//! Where the breaker lives: the state dir (the default) or etcd, and what
//! a run does when etcd cannot be reached.
//!
//! The store URL comes from `--store`, else `TRIPLINE_STORE`, else the
//! `[store]` table of a TOML `--config` (flag > environment > file: the
//! narrower scope wins, as for every other setting of a pipeline step).
//! `on_store_error` comes from `--on-store-error`, else the file, else
//! `run`: the breaker must never become the outage.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::CliError;

/// Exit status when etcd cannot be reached and `on_store_error = "refuse"`
/// (`EX_UNAVAILABLE`): distinct from the open breaker's 75, so a pipeline
/// can tell "the dependency is down" from "the breaker's store is down".
pub(crate) const STORE_REFUSED_EXIT: u8 = 69;

/// What a run does when the shared store cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnStoreError {
    /// Run the command unguarded, warn once, count the error.
    #[default]
    Run,
    /// Do not run the command; exit 69.
    Refuse,
}

/// An `etcd://HOST:PORT/PREFIX` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EtcdUrl {
    /// The URL as given, for messages.
    pub(crate) text: String,
    /// Where it came from (`--store`, `TRIPLINE_STORE`, `[store] url`):
    /// what an error about it names.
    pub(crate) field: String,
    /// The gateway endpoint, `http://HOST:PORT`.
    pub(crate) endpoint: String,
    /// The key prefix, `/PREFIX` (no trailing `/`).
    pub(crate) prefix: String,
}

/// The resolved store settings.
#[derive(Clone, Debug)]
pub(crate) struct StoreSpec {
    /// `None`: the state dir.
    pub(crate) etcd: Option<EtcdUrl>,
    pub(crate) on_error: OnStoreError,
    /// TTL of a probe's etcd lease: how long a killed probe holds its slot.
    pub(crate) probe_ttl: Duration,
    /// Limit of each call to etcd.
    pub(crate) timeout: Duration,
}

/// The `[store]` table of a TOML `--config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreTable {
    url: Option<String>,
    on_store_error: Option<OnStoreError>,
    #[serde(default, with = "humantime_serde_opt")]
    probe_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    timeout: Option<Duration>,
}

mod humantime_serde_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        let value = humantime::parse_duration(&text)
            .map_err(|e| serde::de::Error::custom(format!("{text:?}: {e} (e.g. 10s)")))?;
        if value.is_zero() {
            return Err(serde::de::Error::custom("must be longer than zero"));
        }
        Ok(Some(value))
    }
}

/// Resolves the store from the flag, the environment and the config file.
pub(crate) fn resolve(
    flag: Option<&str>,
    on_error_flag: Option<OnStoreError>,
    config: Option<&Path>,
) -> Result<StoreSpec, CliError> {
    let table = match config {
        Some(path) if is_toml(path) => read_table(path)?,
        _ => StoreTable::default(),
    };
    let env = std::env::var("TRIPLINE_STORE")
        .ok()
        .filter(|v| !v.is_empty());
    let (url, field) = match (flag, env, table.url) {
        (Some(f), ..) => (Some(f.to_owned()), "--store".to_owned()),
        (None, Some(e), _) => (Some(e), "TRIPLINE_STORE".to_owned()),
        (None, None, Some(c)) => (Some(c), "[store] url".to_owned()),
        _ => (None, String::new()),
    };
    let probe_ttl = table.probe_ttl.unwrap_or(Duration::from_secs(10));
    if probe_ttl < Duration::from_secs(2) {
        return Err(CliError::input(format!(
            "[store] probe_ttl: {} is below etcd's shortest lease (2s)",
            humantime::format_duration(probe_ttl)
        )));
    }
    Ok(StoreSpec {
        etcd: url.map(|u| parse_url(&u, &field)).transpose()?,
        on_error: on_error_flag.or(table.on_store_error).unwrap_or_default(),
        probe_ttl,
        timeout: table.timeout.unwrap_or(Duration::from_secs(2)),
    })
}

fn is_toml(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "toml")
}

fn read_table(path: &Path) -> Result<StoreTable, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::input(format!("--config {}: {e}", path.display())))?;
    let (_, store) = split_store_section(&text);
    let Some(store) = store else {
        return Ok(StoreTable::default());
    };
    #[derive(Deserialize)]
    struct Wrapper {
        store: StoreTable,
    }
    toml::from_str::<Wrapper>(&store)
        .map(|w| w.store)
        .map_err(|e| {
            CliError::input(format!(
                "--config {}: [store]: {}",
                path.display(),
                e.message()
            ))
        })
}

/// Splits a TOML text into the breaker's part and the `[store]` table.
/// The table's lines are blanked in the breaker's part, so the line
/// numbers of the breaker's errors stay those of the file.
pub(crate) fn split_store_section(text: &str) -> (String, Option<String>) {
    let mut breaker = String::with_capacity(text.len());
    let mut store: Option<String> = None;
    let mut inside = false;
    for line in text.lines() {
        let head = line.trim();
        if head.starts_with('[') {
            inside = head == "[store]";
        }
        if inside {
            store.get_or_insert_with(String::new).push_str(line);
            store.get_or_insert_with(String::new).push('\n');
            breaker.push('\n');
        } else {
            breaker.push_str(line);
            breaker.push('\n');
        }
    }
    (breaker, store)
}

/// Parses `etcd://HOST:PORT/PREFIX`; `field` names where it came from.
pub(crate) fn parse_url(text: &str, field: &str) -> Result<EtcdUrl, CliError> {
    let bad = |why: &str| CliError::input(format!("{field} {text:?}: {why}"));
    let rest = text
        .strip_prefix("etcd://")
        .ok_or_else(|| bad("the scheme must be etcd:// (etcd://HOST:PORT/PREFIX)"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() {
        return Err(bad("missing HOST:PORT (etcd://HOST:PORT/PREFIX)"));
    }
    let authority = match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => {
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad("the port must be a number 1-65535"))?;
            authority.to_owned()
        }
        _ => format!("{authority}:2379"),
    };
    let prefix = path.trim_matches('/');
    if prefix.is_empty() {
        return Err(bad(
            "missing the key prefix: etcd://HOST:PORT/PREFIX keeps the breaker under /PREFIX",
        ));
    }
    if prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            "the key prefix may not hold spaces or control characters",
        ));
    }
    Ok(EtcdUrl {
        text: text.to_owned(),
        field: field.to_owned(),
        endpoint: format!("http://{authority}"),
        prefix: format!("/{prefix}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_the_scheme_an_authority_and_a_prefix() {
        let u = parse_url("etcd://127.0.0.1:2379/ci/runs/", "--store").unwrap();
        assert_eq!(u.endpoint, "http://127.0.0.1:2379");
        assert_eq!(u.prefix, "/ci/runs");
        assert_eq!(
            parse_url("etcd://etcd/ci", "--store").unwrap().endpoint,
            "http://etcd:2379"
        );
        for (bad, why) in [
            ("http://127.0.0.1:2379/ci", "scheme"),
            ("etcd://127.0.0.1:2379", "prefix"),
            ("etcd://127.0.0.1:2379/", "prefix"),
            ("etcd:///ci", "HOST:PORT"),
            ("etcd://h:99999/ci", "port"),
        ] {
            let e = parse_url(bad, "--store").unwrap_err();
            assert!(
                e.message.contains(why) && e.message.contains("--store"),
                "{bad}: {}",
                e.message
            );
            assert_eq!(e.status, 2);
        }
    }

    #[test]
    fn the_store_table_is_cut_out_keeping_line_numbers() {
        let text =
            "minimum_calls = 3\n[store]\nurl = \"etcd://h:1/p\"\n[window]\nkind = \"count\"\n";
        let (breaker, store) = split_store_section(text);
        assert_eq!(
            breaker,
            "minimum_calls = 3\n\n\n[window]\nkind = \"count\"\n"
        );
        assert_eq!(store.unwrap(), "[store]\nurl = \"etcd://h:1/p\"\n");
    }
}

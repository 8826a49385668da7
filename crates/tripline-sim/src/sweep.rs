//! Sweeps: the cartesian product of parameter values over the first
//! `[[breaker]]`, run in parallel and ranked by [`score`](crate::score).
//!
//! # Grid
//!
//! Each `KEY=V1,V2,...` names a key of the breaker table, dotted for nested
//! tables (`minimum_calls`, `window.size`, `half_open.successes`,
//! `open_duration`), and its values. A value is read as a TOML value when
//! it is one (`10`, `0.5`, `true`, `"5s"`, `{ initial = "1s", max = "30s" }`)
//! and as a string otherwise (`5s`); values are split at commas outside
//! quotes and braces. The product is taken in the order given, the first
//! key outermost. Every point is built as a table, deserialised and
//! validated by the library before anything runs, so a bad value fails the
//! sweep at once, naming the key and the point.
//!
//! # Run
//!
//! One [`Plan`] serves every point; points run on rayon's pool (all cores),
//! each summarised as soon as it finishes so memory stays flat. Results are
//! ranked by score, ties kept in grid order, so the output is deterministic
//! whatever the scheduling.

pub mod output;

use rayon::prelude::*;
use tripline::CircuitBreakerConfig;

use crate::engine::{self, Plan};
use crate::report::Run;
use crate::scenario::{Scenario, ScenarioError};
use crate::score::Score;

/// The most points a grid may have: a million configs over a 100 000-call
/// scenario take about 45 minutes on two cores; a larger grid is a typo
/// or wants splitting.
pub const MAX_POINTS: usize = 1_000_000;

/// The parameter grid of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Keys in the order given, each with its values (as written, as TOML).
    pub axes: Vec<(String, Vec<(String, toml::Value)>)>,
}

/// One configuration of the grid, ranked.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResult {
    /// 1 = best.
    pub rank: usize,
    /// Position in the grid's product order.
    pub index: usize,
    /// `(key, value as written)`, in grid order.
    pub params: Vec<(String, String)>,
    /// The ranking score and its parts.
    pub score: Score,
    /// Closed→Open transitions.
    pub trips: u64,
    /// Healthy calls rejected.
    pub collateral_rejected: u64,
    /// All rejected calls.
    pub rejected: u64,
    /// All failed calls.
    pub failed: u64,
    /// The config's validation warnings.
    pub warnings: Vec<String>,
}

/// A finished sweep, best first.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// The scenario's name.
    pub scenario: String,
    /// The swept breaker's name.
    pub breaker: String,
    /// The grid's keys.
    pub keys: Vec<String>,
    /// Results by rank.
    pub results: Vec<SweepResult>,
}

impl Grid {
    /// Parses `KEY=V1,V2,...` specs (as given to `--grid`).
    ///
    /// ```
    /// use tripline_sim::Grid;
    ///
    /// let grid = Grid::parse(&["minimum_calls=5,10".into(), "open_duration=2s,5s,10s".into()]).unwrap();
    /// assert_eq!(grid.len(), 6);
    /// assert!(Grid::parse(&["minimum_calls".into()]).is_err());
    /// ```
    pub fn parse(specs: &[String]) -> Result<Grid, String> {
        let mut axes: Vec<(String, Vec<(String, toml::Value)>)> = Vec::new();
        for spec in specs {
            let Some((key, values)) = spec.split_once('=') else {
                return Err(format!("--grid {spec:?}: expected KEY=V1,V2,..."));
            };
            let key = key.trim();
            let valid = |p: &str| {
                !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            };
            if !key.split('.').all(valid) {
                return Err(format!("--grid {spec:?}: {key:?} is not a (dotted) key"));
            }
            if axes.iter().any(|(k, _)| k == key) {
                return Err(format!("--grid {spec:?}: key `{key}` is given twice"));
            }
            let values: Vec<(String, toml::Value)> = split_values(values)
                .into_iter()
                .map(|v| (v.clone(), parse_value(&v)))
                .collect();
            if values.iter().any(|(v, _)| v.is_empty()) {
                return Err(format!("--grid {spec:?}: empty value"));
            }
            axes.push((key.to_owned(), values));
        }
        if axes.is_empty() {
            return Err("a sweep needs at least one --grid KEY=V1,V2,...".to_owned());
        }
        let points = axes
            .iter()
            .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()))
            .filter(|&n| n <= MAX_POINTS);
        if points.is_none() {
            let sizes: Vec<String> = axes.iter().map(|(_, v)| v.len().to_string()).collect();
            return Err(format!(
                "--grid: {} points is more than a sweep takes (at most {MAX_POINTS}): \
                 split it, or sweep the axes that matter first",
                sizes.join(" × ")
            ));
        }
        Ok(Grid { axes })
    }

    /// Points in the product: `Π values` (at most [`MAX_POINTS`]).
    pub fn len(&self) -> usize {
        self.axes
            .iter()
            .fold(1usize, |n, (_, v)| n.saturating_mul(v.len()))
    }

    /// Whether the grid has no point (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value indices of point `i`, first key outermost.
    fn point(&self, mut i: usize) -> Vec<usize> {
        let mut idx = vec![0; self.axes.len()];
        for (a, (_, values)) in self.axes.iter().enumerate().rev() {
            idx[a] = i % values.len();
            i /= values.len();
        }
        idx
    }
}

/// Splits at commas outside quotes, braces and brackets.
fn split_values(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quote) = (Vec::new(), String::new(), 0i32, None);
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '{' | '[') => depth += 1,
            (None, '}' | ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(cur.trim().to_owned());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_owned());
    out
}

fn parse_value(v: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_owned()))
}

/// Sets the dotted `key` of `table` to `value`, creating tables on the way.
fn set(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), String> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut t = table;
    for p in parts {
        let entry = t
            .entry(p.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| format!("`{p}` is not a table, so `{key}` cannot be set"))?;
    }
    t.insert(last.to_owned(), value);
    Ok(())
}

impl Sweep {
    /// Builds and validates every point of `grid` over the first breaker of
    /// `scenario`, runs them in parallel (calling `progress` after each) and
    /// ranks them.
    ///
    /// ```
    /// use tripline_sim::{Grid, Scenario, Sweep};
    ///
    /// let scenario = Scenario::from_toml("doc.toml", r#"
    ///     duration = "30s"
    ///     [traffic]
    ///     rate = 10.0
    ///     [[fault]]
    ///     name = "down"
    ///     start = "10s"
    ///     end = "20s"
    ///     [[breaker]]
    ///     name = "b"
    ///     window = { kind = "count", size = 20 }
    /// "#).unwrap();
    /// let grid = Grid::parse(&["failure_rate_threshold=0.8,0.2".into()]).unwrap();
    /// let sweep = Sweep::run(&scenario, &grid, &|| {}).unwrap();
    /// // 4 failures in 20 trip at 20 %, 16 at 80 %: the lower threshold
    /// // detects sooner and, with nothing to trip on by mistake, ranks first.
    /// assert_eq!(sweep.results[0].params, [("failure_rate_threshold".to_owned(), "0.2".to_owned())]);
    /// assert!(sweep.results[0].score.detection < sweep.results[1].score.detection);
    /// ```
    pub fn run(
        scenario: &Scenario,
        grid: &Grid,
        progress: &(dyn Fn() + Sync),
    ) -> Result<Sweep, ScenarioError> {
        Self::run_breaker(scenario, None, grid, progress)
    }

    /// [`run`](Self::run) over the `[[breaker]]` named `breaker` (the
    /// first one when `None`): a scenario that compares several breakers
    /// can have any of them swept. An unknown name is an error listing the
    /// names the scenario has.
    pub fn run_breaker(
        scenario: &Scenario,
        breaker: Option<&str>,
        grid: &Grid,
        progress: &(dyn Fn() + Sync),
    ) -> Result<Sweep, ScenarioError> {
        let found = match breaker {
            None => scenario.breakers.first().map(|b| (0, b)),
            Some(name) => scenario
                .breakers
                .iter()
                .enumerate()
                .find(|(_, b)| b.config.name == name),
        };
        let (position, base) = found.ok_or_else(|| {
            let names: Vec<String> = scenario
                .breakers
                .iter()
                .map(|b| format!("{:?}", b.config.name))
                .collect();
            ScenarioError {
                file: scenario.file.clone(),
                position: None,
                table: None,
                field: Some(
                    if breaker.is_some() {
                        "--breaker"
                    } else {
                        "breaker"
                    }
                    .into(),
                ),
                message: match breaker {
                    None => "a sweep needs a [[breaker]] table".into(),
                    Some(name) if names.is_empty() => {
                        format!("no [[breaker]] named {name:?}: the scenario has none")
                    }
                    Some(name) => format!(
                        "no [[breaker]] named {name:?}; the scenario has {}",
                        names.join(", ")
                    ),
                },
            }
        })?;
        let label = format!("[[breaker]] #{} {:?}", position + 1, base.config.name);
        if grid.len() > MAX_POINTS {
            // `Grid::parse` refuses these; a grid built by hand may not.
            return Err(ScenarioError {
                file: scenario.file.clone(),
                position: None,
                table: None,
                field: Some("--grid".into()),
                message: format!("more than {MAX_POINTS} points"),
            });
        }
        let mut points = Vec::with_capacity(grid.len());
        for i in 0..grid.len() {
            let idx = grid.point(i);
            let mut table = base.table.clone();
            let mut params = Vec::with_capacity(idx.len());
            for (a, &v) in idx.iter().enumerate() {
                let (key, values) = &grid.axes[a];
                params.push((key.clone(), values[v].0.clone()));
                set(&mut table, key, values[v].1.clone()).map_err(|m| ScenarioError {
                    file: scenario.file.clone(),
                    position: None,
                    table: Some(label.clone()),
                    field: Some(key.clone()),
                    message: format!("--grid: {m}"),
                })?;
            }
            let shown: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let err = |field: String, m: String| ScenarioError {
                file: scenario.file.clone(),
                position: None,
                table: Some(label.clone()),
                field: Some(field),
                message: format!("--grid point {}: {m}", shown.join(" ")),
            };
            let mut config: CircuitBreakerConfig =
                toml::Value::Table(table)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        let keys: Vec<&str> = grid.axes.iter().map(|(k, _)| k.as_str()).collect();
                        let field = crate::error::named_field(e.message())
                            .map_or_else(|| keys.join(", "), str::to_owned);
                        err(field, e.message().to_owned())
                    })?;
            config.name = base.config.name.clone();
            let warnings = config
                .validate()
                .map_err(|e| err(e.field.clone(), e.constraint))?;
            points.push((i, params, config, warnings));
        }
        let plan = Plan::new(scenario);
        let mut results = points
            .into_par_iter()
            .map(|(index, params, config, warnings)| {
                let trace = engine::run(scenario, &plan, &config);
                progress();
                let run = Run::new(
                    scenario,
                    &plan,
                    &config.name,
                    trace.map_err(|e| err_of(scenario, &label, &e))?,
                );
                Ok(SweepResult {
                    rank: 0,
                    index,
                    params,
                    trips: run.trips(),
                    score: run.score,
                    collateral_rejected: run.collateral_rejected,
                    rejected: run.totals.rejected,
                    failed: run.totals.failed,
                    warnings: warnings.iter().map(ToString::to_string).collect(),
                })
            })
            .collect::<Result<Vec<_>, ScenarioError>>()?;
        results.sort_by(|a, b| {
            a.score
                .value
                .total_cmp(&b.score.value)
                .then(a.index.cmp(&b.index))
        });
        // Standard competition ranking ("1, 1, 3"): results whose scores
        // are equal to the millisecond share the first one's rank, and the
        // next result's rank counts every result above it.
        let mut previous: Option<(f64, usize)> = None;
        for (i, res) in results.iter_mut().enumerate() {
            res.rank = match previous {
                Some((score, rank)) if same_score(score, res.score.value) => rank,
                _ => i + 1,
            };
            previous = Some((res.score.value, res.rank));
        }
        Ok(Sweep {
            scenario: scenario.name.clone(),
            breaker: base.config.name.clone(),
            keys: grid.axes.iter().map(|(k, _)| k.clone()).collect(),
            results,
        })
    }
}

fn err_of(scenario: &Scenario, label: &str, e: &tripline::ConfigError) -> ScenarioError {
    ScenarioError {
        file: scenario.file.clone(),
        position: None,
        table: Some(label.to_owned()),
        field: Some(e.field.clone()),
        message: e.constraint.clone(),
    }
}

/// Whether two scores are equal to the millisecond: closer than that, the
/// order between two configs is the grid's, not merit, and they share a
/// rank.
pub fn same_score(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.0005
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_outside_braces_and_parse_as_toml() {
        let g = Grid::parse(&[
            "minimum_calls=5, 10".into(),
            r#"open_duration=5s,{ initial = "1s", max = "8s" }"#.into(),
        ])
        .expect("valid grid");
        assert_eq!(g.len(), 4);
        assert_eq!(g.axes[0].1[1].1, toml::Value::Integer(10));
        assert_eq!(g.axes[1].1[0].1, toml::Value::String("5s".into()));
        assert!(g.axes[1].1[1].1.is_table());
        assert_eq!(g.point(3), [1, 1]);
        assert_eq!(g.point(1), [0, 1]);
        assert!(Grid::parse(&["x".into()]).is_err());
        assert!(Grid::parse(&["a b=1".into()]).is_err());
    }
}

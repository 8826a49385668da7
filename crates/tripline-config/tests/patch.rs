//! A pushed `[[breaker]]` table patches: it changes the fields it names on
//! top of the config the breaker's owner gave it, and nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::breaker::Cooldown;
use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock, State, WindowConfig};
use tripline_config::{Applier, ApplyError, Document, DocumentError, Origin};

fn etcd() -> Origin {
    Origin::new("etcd", None)
}

/// What a proxy file says for `payments`: not the library's defaults.
fn file_config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "payments".into(),
        window: WindowConfig::Count { size: 20 },
        minimum_calls: 10,
        failure_rate_threshold: 0.5,
        ..Default::default()
    }
}

fn owned(clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(file_config())
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn a_one_field_table_changes_that_field_and_keeps_the_owners_others() {
    let clock = ManualClock::new();
    let breaker = owned(&clock);
    let applier = Applier::builder()
        .clock(clock)
        .manage(breaker.clone())
        .build();

    let record = applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nfailure_rate_threshold = 0.2\n",
            etcd(),
        )
        .unwrap();

    let live = breaker.config();
    assert_eq!(live.failure_rate_threshold, 0.2);
    assert_eq!(
        live,
        CircuitBreakerConfig {
            failure_rate_threshold: 0.2,
            ..file_config()
        },
        "every field the table does not name is the file's"
    );
    let fields: Vec<_> = record.changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["failure_rate_threshold"]);

    // The document is the whole wish: a field a later document stops
    // naming goes back to the owner's value, not the last pushed one.
    applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nminimum_calls = 12\n",
            etcd(),
        )
        .unwrap();
    let live = breaker.config();
    assert_eq!((live.minimum_calls, live.failure_rate_threshold), (12, 0.5));
    assert_eq!(live.window, WindowConfig::Count { size: 20 });
}

#[test]
fn a_nested_table_is_one_field_and_replaces_the_owners_whole() {
    let clock = ManualClock::new();
    let breaker = owned(&clock);
    let applier = Applier::builder()
        .clock(clock)
        .manage(breaker.clone())
        .build();
    applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nwindow = { kind = \"time\", length = \"10s\", buckets = 10 }\n",
            etcd(),
        )
        .unwrap();
    let live = breaker.config();
    assert_eq!(
        live.window,
        WindowConfig::Time {
            length: Duration::from_secs(10),
            buckets: 10
        }
    );
    assert_eq!(live.minimum_calls, 10);

    // Half a window is not a window: refused naming it, nothing changes.
    let err = applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nwindow = { size = 50 }\n",
            etcd(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("window"), "{err}");
    assert_eq!(breaker.config(), live);
}

#[test]
fn a_table_that_does_not_fit_this_instances_own_config_is_refused_whole() {
    // Valid on the library's defaults, but this owner's cooldown threshold
    // (0.3) would be looser than the pushed failure threshold (0.2).
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            cooldown: Some(Cooldown {
                duration: Duration::from_secs(30),
                failure_rate_threshold: 0.3,
            }),
            ..file_config()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let applier = Applier::builder()
        .clock(clock)
        .manage(breaker.clone())
        .build();
    let doc = "[[breaker]]\nname = \"other\"\nminimum_calls = 5\n\n\
               [[breaker]]\nname = \"payments\"\nfailure_rate_threshold = 0.2\n";
    assert!(Document::parse_and_validate(doc.as_bytes()).is_ok());

    let err = applier.apply(doc.as_bytes(), etcd()).unwrap_err();

    let ApplyError::Document(DocumentError::Invalid {
        breaker: name,
        field,
        ..
    }) = &err
    else {
        panic!("unexpected {err:?}");
    };
    assert_eq!(
        (name.as_str(), field.as_str()),
        ("payments", "cooldown.failure_rate_threshold")
    );
    assert_eq!(breaker.config().failure_rate_threshold, 0.5);
    assert!(applier.breaker("other").is_none(), "nothing of it applied");
    assert_eq!(applier.version(), 0);
}

#[test]
fn a_rebuilt_or_reloaded_breaker_keeps_the_pushed_fields_and_takes_the_owners_new_others() {
    let clock = ManualClock::new();
    let applier = Applier::builder().clock(clock.clone()).build();
    applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nfailure_rate_threshold = 0.2\n",
            etcd(),
        )
        .unwrap();
    // The owner builds the breaker (a proxy starting up): the table is laid
    // on the owner's config before it takes traffic.
    let breaker = owned(&clock);
    applier.adopt_breaker(breaker.clone()).unwrap();
    assert_eq!(
        breaker.config(),
        CircuitBreakerConfig {
            failure_rate_threshold: 0.2,
            ..file_config()
        }
    );
    for _ in 0..10 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
    assert_eq!(breaker.state(), State::Open);

    // The owner's file changes (a reload that keeps the breaker).
    let reloaded = CircuitBreakerConfig {
        minimum_calls: 15,
        ..file_config()
    };
    let wanted = applier.rebase(reloaded.clone());
    assert_eq!(
        wanted,
        CircuitBreakerConfig {
            failure_rate_threshold: 0.2,
            ..reloaded
        }
    );
    breaker.reconfigure(wanted).unwrap();
    applier.adopt_breaker(breaker.clone()).unwrap();
    assert_eq!(breaker.state(), State::Open, "state kept");

    // A later push patches the new base.
    applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nminimum_calls = 4\n",
            etcd(),
        )
        .unwrap();
    let live = breaker.config();
    assert_eq!((live.minimum_calls, live.failure_rate_threshold), (4, 0.5));
}

#[test]
fn a_document_names_only_its_fields_and_reads_back_from_its_own_toml() {
    let doc = Document::parse(
        b"[[breaker]]\nname = \"payments\"\nslow_call_duration = \"2000ms\"\nminimum_calls = 5\n",
    )
    .unwrap();
    let fields: Vec<_> = doc.breakers[0].fields.keys().cloned().collect();
    assert_eq!(fields, ["minimum_calls", "slow_call_duration"]);
    assert_eq!(doc.breakers[0].fields["slow_call_duration"], "2s");
    let written = doc.to_toml().unwrap();
    assert_eq!(Document::parse(written.as_bytes()).unwrap(), doc);

    // A JSON null would mean "unset", which TOML cannot say: refused.
    let err =
        Document::parse(br#"{"breaker": [{"name": "payments", "slow_call_duration": null}]}"#)
            .unwrap_err();
    assert!(err.to_string().contains("slow_call_duration"), "{err}");
    // A typo is named with its line.
    let err = Document::parse(b"[[breaker]]\nname = \"p\"\nminimum_cals = 5\n").unwrap_err();
    assert!(
        err.to_string().contains("minimum_cals") && err.to_string().contains("line"),
        "{err}"
    );
}

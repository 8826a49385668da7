//! Bytes per breaker: constructors of one breaker (or one layered
//! service) per library, for the allocation runner to measure the heap it
//! keeps plus the handle itself.

use std::any::Any;
use std::sync::Arc;

use tower::Layer as _;

use super::closed;
use super::layers::echo;

/// One library's breaker, built on demand.
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    /// Library and variant, as in the workload tables.
    pub name: &'static str,
    /// Builds one breaker, boxed (the box holds the handle: its size counts).
    pub build: fn() -> Box<dyn Any>,
    /// The library's own estimate, where it has one.
    pub reported: Option<fn() -> usize>,
    /// How many breakers `build` makes (1, or 20 000 keyed ones).
    pub breakers: usize,
}

/// One breaker per library, with the configurations of the `closed` workload.
pub fn footprints() -> Vec<Footprint> {
    vec![
        Footprint {
            name: "tripline",
            build: || Box::new(closed::tripline_default()),
            reported: Some(|| closed::tripline_default().memory_footprint()),
            breakers: 1,
        },
        Footprint {
            name: "tripline_layer",
            build: || {
                Box::new(
                    tripline::tower::CircuitBreakerLayer::new(closed::tripline_default())
                        .layer(echo()),
                )
            },
            reported: None,
            breakers: 1,
        },
        Footprint {
            name: "recloser",
            build: || Box::new(closed::recloser_default()),
            reported: None,
            breakers: 1,
        },
        Footprint {
            name: "failsafe_default",
            build: || {
                Box::new(
                    failsafe::Config::new()
                        .failure_policy(closed::failsafe_default_policy())
                        .build(),
                )
            },
            reported: None,
            breakers: 1,
        },
        Footprint {
            name: "failsafe_consecutive",
            build: || {
                Box::new(
                    failsafe::Config::new()
                        .failure_policy(failsafe::failure_policy::consecutive_failures(
                            5,
                            failsafe::backoff::constant(std::time::Duration::from_secs(5)),
                        ))
                        .build(),
                )
            },
            reported: None,
            breakers: 1,
        },
        Footprint {
            name: "circuitbreaker_rs",
            build: || Box::new(Arc::new(closed::circuitbreaker_rs_default())),
            reported: None,
            breakers: 1,
        },
        Footprint {
            name: "tower_resilience",
            build: || {
                let _rt = crate::runtime().enter();
                Box::new(super::layers::tower_resilience_breaker().layer(echo()))
            },
            reported: None,
            breakers: 1,
        },
        Footprint {
            name: "seatbelt",
            build: || Box::new(super::layers::seatbelt_service()),
            reported: None,
            breakers: 1,
        },
    ]
}

/// 20 000 keyed breakers: tripline's `BreakerRegistry<Key>`; each
/// library's breakers in a `DashMap<Key, _>` with foldhash; seatbelt's
/// one breaker partitioned into 20 000 `breaker_id`s.
pub fn keyed_footprints() -> Vec<Footprint> {
    use super::keyed::{KEYS, keys, map_of};
    vec![
        Footprint {
            name: "tripline_registry",
            build: || Box::new(super::keyed::registry_of(&keys())),
            reported: None,
            breakers: KEYS,
        },
        Footprint {
            name: "tripline_dashmap",
            build: || Box::new(map_of(&keys(), closed::tripline_default)),
            reported: None,
            breakers: KEYS,
        },
        Footprint {
            name: "recloser_dashmap",
            build: || Box::new(map_of(&keys(), closed::recloser_default)),
            reported: None,
            breakers: KEYS,
        },
        Footprint {
            name: "failsafe_dashmap",
            build: || {
                Box::new(map_of(&keys(), || {
                    failsafe::Config::new()
                        .failure_policy(closed::failsafe_default_policy())
                        .build()
                }))
            },
            reported: None,
            breakers: KEYS,
        },
        Footprint {
            name: "circuitbreaker_rs_dashmap",
            build: || Box::new(map_of(&keys(), closed::circuitbreaker_rs_default)),
            reported: None,
            breakers: KEYS,
        },
        Footprint {
            name: "seatbelt_breaker_id",
            build: || Box::new(super::keyed::seatbelt_keyed()),
            reported: None,
            breakers: KEYS,
        },
    ]
}

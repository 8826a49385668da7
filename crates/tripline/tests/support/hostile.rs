//! Value generators shared by the robustness property tests: a field's
//! value is sane, or — in a hostile config — one time in four hostile.

use proptest::prelude::*;

/// A value from `valid`; in a hostile config (`h`) one in four comes from
/// `hostile` instead. Sane configs use valid values only, so that many of
/// them get through validation and exercise what comes after.
pub fn pick(
    h: bool,
    valid: &[&'static str],
    hostile: &[&'static str],
) -> BoxedStrategy<&'static str> {
    let valid = prop::sample::select(valid.to_vec());
    if h {
        prop_oneof![3 => valid, 1 => prop::sample::select(hostile.to_vec())].boxed()
    } else {
        valid.boxed()
    }
}

"""Configs from keywords, dicts and files; bad input names the field."""

from __future__ import annotations

import datetime
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tripline


def test_whole_vocabulary_as_keywords():
    b = tripline.CircuitBreaker(
        "payments",
        window={"kind": "time", "length": datetime.timedelta(seconds=10), "buckets": 10},
        minimum_calls=20,
        failure_rate_threshold=0.5,
        slow_call_duration=datetime.timedelta(milliseconds=250),
        slow_call_rate_threshold=0.8,
        open_duration={"initial": "1s", "multiplier": 2.0, "max": 60, "jitter": "full"},
        half_open={"policy": "permits", "calls": 10, "failure_rate_threshold": 0.2},
        max_half_open_duration=30.0,
        min_state_duration="2s",
        slow_probe_factor=2.0,
    )
    c = b.config
    assert c["name"] == "payments"
    assert c["window"] == {"kind": "time", "length": "10s", "buckets": 10}
    assert c["slow_call_duration"] == "250ms"
    assert c["max_half_open_duration"] == "30s"


def test_durations_accept_timedelta_seconds_and_text():
    for value in (datetime.timedelta(seconds=7), 7, 7.0, "7s"):
        assert tripline.CircuitBreaker("d", open_duration=value).config["open_duration"] == "7s"


def test_from_dict():
    b = tripline.CircuitBreaker.from_dict({"name": "inv", "minimum_calls": 5, "window": {"kind": "count", "size": 10}})
    assert b.name == "inv" and b.config["minimum_calls"] == 5
    assert tripline.CircuitBreaker.from_dict({}, name="x").name == "x"
    with pytest.raises(TypeError, match="data"):
        tripline.CircuitBreaker.from_dict([1, 2])


@pytest.mark.parametrize(
    "suffix,text",
    [
        (".toml", 'name = "f"\nminimum_calls = 3\nopen_duration = "2s"\n'),
        (".yaml", "name: f\nminimum_calls: 3\nopen_duration: 2s\n"),
        (".json", json.dumps({"name": "f", "minimum_calls": 3, "open_duration": "2s"})),
    ],
)
def test_from_file(tmp_path, suffix, text):
    path = tmp_path / ("breaker" + suffix)
    path.write_text(text)
    b = tripline.CircuitBreaker.from_file(path)
    assert (b.name, b.config["minimum_calls"], b.config["open_duration"]) == ("f", 3, "2s")


def test_from_file_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "f"\nminimum_calls = "three"\n')
    with pytest.raises(ValueError) as info:
        tripline.CircuitBreaker.from_file(path)
    assert "bad.toml" in str(info.value) and "minimum_calls" in str(info.value)
    with pytest.raises(ValueError):
        tripline.CircuitBreaker.from_file(tmp_path / "missing.toml")


def test_unknown_keyword_is_named():
    with pytest.raises(ValueError, match="failure_threshold"):
        tripline.CircuitBreaker("x", failure_threshold=0.5)


def test_threshold_out_of_range_names_field_and_constraint():
    with pytest.raises(ValueError) as info:
        tripline.CircuitBreaker("x", failure_rate_threshold=1.5)
    assert "failure_rate_threshold" in str(info.value)
    assert "(0, 1]" in str(info.value)


def test_wrong_type_is_a_type_error_naming_the_field():
    with pytest.raises(TypeError, match="minimum_calls"):
        tripline.CircuitBreaker("x", minimum_calls="many")
    with pytest.raises(TypeError, match="`window`.*expected u32"):
        tripline.CircuitBreaker("x", window={"kind": "count", "size": "big"})
    with pytest.raises(TypeError, match="open_duration"):
        tripline.CircuitBreaker("x", open_duration=object())
    with pytest.raises(TypeError, match="open_duration"):
        tripline.CircuitBreaker("x", open_duration=True)
    with pytest.raises(TypeError, match="name"):
        tripline.CircuitBreaker(42)


def test_bad_durations_are_named():
    with pytest.raises(ValueError, match="open_duration.*negative"):
        tripline.CircuitBreaker("x", open_duration=datetime.timedelta(seconds=-1))
    with pytest.raises(ValueError, match="open_duration"):
        tripline.CircuitBreaker("x", open_duration=float("nan"))
    with pytest.raises(ValueError, match="open_duration"):
        tripline.CircuitBreaker("x", open_duration="soon")


@settings(max_examples=200, deadline=None)
@given(
    threshold=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10)),
    minimum=st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=3), st.none()),
)
def test_arbitrary_values_raise_python_errors_never_crash(threshold, minimum):
    try:
        tripline.CircuitBreaker("h", failure_rate_threshold=threshold, minimum_calls=minimum)
    except (ValueError, TypeError) as e:
        assert "failure_rate_threshold" in str(e) or "minimum_calls" in str(e)

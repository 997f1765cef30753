"Fuzz / property tests: parse_verdict never crashes and every bad output gets the documented fallback."
import json
import logging

from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.world_model.verdicts import (
    BUCKET_POSITION,
    CHECKS,
    FIELD_LIMITS,
    VERDICT_SCHEMA,
    Verdict,
    aggregate,
    fallback_counts,
    parse_and_aggregate,
    parse_verdict,
)

FALLBACK_CODES = {None, "empty", "no_json", "truncated", "bad_verdict"}
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
                           lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
                           max_leaves=8)


def valid_object():
    return st.fixed_dictionaries({
        "reason": st.text(max_size=250), "verdict": st.sampled_from(["pass", "fail"]),
        "confidence": st.floats(0, 1), "error_type": st.text(max_size=50), "line": st.integers(0, 500),
        "feedback": st.text(max_size=450), "quality": st.sampled_from(["", *BUCKET_POSITION])})


def assert_well_formed(v: Verdict, check: str):
    assert v.check == check and v.verdict in ("pass", "fail") and 0.0 <= v.confidence <= 1.0 and v.line >= 0
    assert v.fallback in FALLBACK_CODES
    for name, limit in FIELD_LIMITS.items():
        assert isinstance(getattr(v, name), str) and len(getattr(v, name)) <= limit
    if v.fallback is not None:  # documented fallback: a pass with confidence 0
        assert v.verdict == "pass" and v.confidence == 0.0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.sampled_from(CHECKS))
def test_arbitrary_text_never_crashes(text, check):
    assert_well_formed(parse_verdict(text, check), check)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from(CHECKS))
def test_arbitrary_json_wrong_types_never_crash(value, check):
    v = parse_verdict(json.dumps(value), check)
    assert_well_formed(v, check)
    if not (isinstance(value, dict) and isinstance(value.get("verdict"), str)):
        # a top-level value without a string verdict can only be used if a nested object carries one
        assert v.fallback is not None or "verdict" in json.dumps(value)


@settings(max_examples=200, deadline=None)
@given(valid_object(), st.sampled_from(CHECKS), st.sampled_from(["{}", "```json\n{}\n```", "Answer: {} done", "<think>hmm {\"verdict\": \"fail\"}</think>{}"]))
def test_valid_objects_round_trip_in_any_wrapper(obj, check, wrapper):
    v = parse_verdict(wrapper.replace("{}", json.dumps(obj), 1) if wrapper.count("{}") == 1 else wrapper.replace("{}", json.dumps(obj)), check)
    assert_well_formed(v, check)
    assert v.fallback is None and v.verdict == obj["verdict"] and v.line == obj["line"]
    assert abs(v.confidence - obj["confidence"]) < 1e-12


@settings(max_examples=200, deadline=None)
@given(valid_object(), st.sampled_from(CHECKS), st.integers(1, 400))
def test_truncated_output_falls_back(obj, check, cut):
    text = json.dumps(obj)
    truncated = text[: min(cut, len(text) - 1)]
    v = parse_verdict(truncated, check)
    assert_well_formed(v, check)
    # an object nested inside a string field can still parse, but never one with a usable verdict
    assert v.fallback in ("truncated", "bad_verdict")


@settings(max_examples=100, deadline=None)
@given(valid_object(), valid_object(), st.sampled_from(CHECKS))
def test_multiple_objects_first_usable_wins(first, second, check):
    v = parse_verdict(json.dumps(first) + "\n" + json.dumps(second), check)
    assert v.verdict == first["verdict"] and "multiple_objects" in v.repairs


@settings(max_examples=100, deadline=None)
@given(valid_object(), st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in VERDICT_SCHEMA["properties"]), json_values, min_size=1, max_size=3), st.sampled_from(CHECKS))
def test_extra_fields_are_dropped_and_recorded(obj, extra, check):
    v = parse_verdict(json.dumps({**obj, **extra}), check)
    assert v.fallback is None and "extra_fields" in v.repairs


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=80), valid_object().map(json.dumps)), min_size=8, max_size=8))
def test_aggregate_of_any_outputs_is_on_the_ladder_and_counts_fallbacks(texts):
    p = parse_and_aggregate(texts)
    assert p.status in {"ok", "runtime_error", "timeout", "memory", "no_submission", "invalid_submission"}
    assert 0.0 <= p.score <= 1.0
    n_unusable = sum(parse_verdict(t, c).fallback is not None for t, c in zip(texts, CHECKS))
    assert p.fallbacks >= n_unusable
    assert sum(fallback_counts([p]).values()) == p.fallbacks


def test_fallbacks_are_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="wmrl.wm"):
        parse_verdict("not json", "submission")
    assert any("submission" in r.message and "no_json" in r.message for r in caplog.records)


def test_specific_hostile_outputs():
    cases = {"": "empty", "   ": "empty", "{": "truncated", '{"verdict": "fail", "confidence": 0.9': "truncated",
             "[1, 2]": "no_json", "null": "no_json", '{"verdict": "maybe"}': "bad_verdict", '{"verdict": 1}': "bad_verdict",
             '{"VERDICT": "fail"}': "bad_verdict", "{" * 5000: "truncated", '"{\\"verdict\\": \\"fail\\"}"': "truncated"}
    for text, code in cases.items():
        assert parse_verdict(text, "api_calls").fallback == code, text[:40]
    assert parse_verdict(b'{"verdict": "fail"}', "api_calls").fallback == "empty"   # bytes are not text
    deep = "[" * 3000 + "]" * 3000
    assert parse_verdict(deep, "api_calls").fallback == "no_json"
    v = parse_verdict('{"verdict": " Fail ", "confidence": "high", "line": "12", "quality": "HIGH", "error_type": null}', "quality")
    assert (v.verdict, v.confidence, v.line, v.quality, v.error_type) == ("fail", 0.5, 12, "high", "")
    assert {"confidence", "line", "quality", "error_type"} <= set(v.repairs)


def test_aggregate_uses_confidence_gate():
    fail = Verdict("api_calls", "fail", 0.6, "TypeError", 3)
    assert aggregate([fail], min_confidence=0.5).status == "runtime_error"
    assert aggregate([fail], min_confidence=0.7).status == "ok"
    assert aggregate([fail], min_confidence=0.7).doubted == ["api_calls"]

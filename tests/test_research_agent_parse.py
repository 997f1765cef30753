"""parse_action and truncate_observation on hostile text: hypothesis fuzzing (never crashes, always a valid
Action, code always a substring of the message), the official priority order on generated mixtures, and
truncation invariants (budget respected, head and tail kept, short texts unchanged)."""
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.adapters.agent_actions import ACTION_KINDS, Action, parse_action, scan_fences, truncate_observation
from wmrl.adapters.research_agent import clip_response

PIECES = st.sampled_from(["```", "```python\n", "```py\n", "```bash\n", "\n", "<action>request_info</action>",
                          "<action>validate_code</action>", "request_info", "<info_type>metadata</info_type>",
                          "print(1)", "x = 1\n", "`", "``", " ", "\x00", "\u202e", "𝔘", "\r\n"])
HOSTILE = st.one_of(st.text(max_size=400), st.lists(PIECES, max_size=40).map("".join),
                    st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=60).map("".join))


@settings(max_examples=600, deadline=None)
@given(HOSTILE)
def test_parse_never_crashes_and_is_consistent(text):
    action = parse_action(text)
    assert isinstance(action, Action) and action.kind in ACTION_KINDS
    if action.kind in ("execute_code", "validate_code"):
        assert action.code.strip() and action.code in text
        assert action.rule in ("python_fence", "generic_fence", "unclosed_fence")
    elif action.kind == "request_info":
        assert action.rule in ("info_tag", "bare_request_info") and re.fullmatch(r"[a-z_]{1,40}", action.info_type)
    else:
        # malformed: no standalone request_info word (a longer identifier such as x_request_info does not count)
        assert not re.search(r"(?<![A-Za-z0-9_])request_info(?![A-Za-z0-9_])", text, re.IGNORECASE) and action.code == ""
    assert parse_action(text) == action  # deterministic


@settings(max_examples=300, deadline=None)
@given(prose=st.text(alphabet=st.characters(blacklist_characters="`"), max_size=80).filter(lambda t: "request_info" not in t.lower()),
       bodies=st.lists(st.from_regex(r"[a-z]{1,8} = [0-9]{1,3}", fullmatch=True), min_size=1, max_size=4),
       with_tag=st.booleans(), generic_last=st.booleans())
def test_priority_order_on_generated_mixtures(prose, bodies, with_tag, generic_last):
    blocks = "".join(f"```python\n{b}\n```\n{prose}\n" for b in bodies)
    text = ("<action>request_info</action>\n" if with_tag else "") + prose + "\n" + blocks
    if generic_last:
        text += "```\nlast_generic = 0\n```\n"
    action = parse_action(text)
    assert action == Action("execute_code", code=bodies[-1] + "\n", rule="python_fence")  # python beats generic and the tag
    assert parse_action(text.rstrip().rstrip("`") + "\n```python\ncut = 1") .kind == "execute_code"


def test_priority_rules_one_by_one():
    assert parse_action("<action>request_info</action>").rule == "info_tag"
    assert parse_action("<ACTION> request_info </ACTION> and ```bash\nls\n```").rule == "info_tag"  # bash is not code
    assert parse_action("```\na = 1\n```").rule == "generic_fence"
    assert parse_action("text\n```python\na = 1").rule == "unclosed_fence"
    assert parse_action("```python").kind == "malformed"  # an empty unclosed fence is not a program
    assert parse_action("call request_info(info_type='data_structure')").info_type == "data_structure"
    assert parse_action("").kind == "malformed"
    with pytest.raises(TypeError):
        parse_action(b"```python\nx=1\n```")


def test_huge_hostile_message_parses():
    text = "```" * 200_000 + "request_info" + "`" * 100_000
    action = parse_action(text)
    assert action.kind in ACTION_KINDS
    closed, unclosed = scan_fences("```python\n" + "x = 1\n" * 100_000 + "```")
    assert len(closed) == 1 and unclosed is None


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.text(alphabet="abc.:'\"()", min_size=1, max_size=6), max_size=300),
       seps=st.sampled_from([" ", "\n", "  \t", "\r\n"]), budget=st.integers(1, 120))
def test_truncation_invariants(words, seps, budget):
    text = seps.join(words)
    out = truncate_observation(text, budget)
    if len(words) <= budget:
        assert out == text
        return
    head_n = (2 * budget) // 3
    tail_n = budget - head_n
    marker = f"... [{len(words) - budget} tokens truncated] ..."
    assert marker in out
    head, tail = out.split("\n" + marker + "\n")
    assert head.split() == words[:head_n] and tail.split() == words[len(words) - tail_n:]


def test_truncation_and_clip_errors():
    with pytest.raises(ValueError, match="positive int"):
        truncate_observation("a b", True)
    with pytest.raises(ValueError, match="positive int"):
        clip_response("a b", -3)
    with pytest.raises(TypeError, match="must be a str"):
        truncate_observation(None, 10)
    assert clip_response("a  b\nc d", 3) == "a  b\nc"

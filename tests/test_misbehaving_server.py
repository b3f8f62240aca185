"""A misbehaving OpenAI-compatible server: every odd answer becomes a clean ``EndpointError`` or a sane
``Completion`` (string texts, integer token counts, finite log-probabilities), never a Python exception.

The answer bodies are hand-written here and handed to the client in place of the HTTP round trip.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pools.client.openai_client import Completion, EndpointError, OpenAIClient

GOOD_CHOICE = {"index": 0, "message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop"}


def _answer(body: dict[str, Any], api: str) -> Completion:
    client = OpenAIClient("http://fake", "m")
    client._request = lambda path, payload: (body, 0.01, 1)  # type: ignore[method-assign]
    if api == "chat":
        return client.chat([{"role": "user", "content": "q"}], logprobs=True, top_logprobs=2)
    return client.complete("q", logprobs=True, top_logprobs=2)


@pytest.mark.parametrize(("body", "match"), [
    ({"choices": []}, "no choices"),
    ({}, "no choices"),
    ({"choices": "abc"}, "choices are abc; expected a list of objects"),
    ({"choices": [1, 2]}, "expected a list of objects"),
    ({"choices": [GOOD_CHOICE], "usage": {"completion_tokens": "12"}}, r"usage\.completion_tokens is '12'"),
    ({"choices": [GOOD_CHOICE], "usage": {"completion_tokens": 2.5}}, r"usage\.completion_tokens is '2\.5'"),
    ({"choices": [GOOD_CHOICE], "usage": {"prompt_tokens": -1}}, r"usage\.prompt_tokens is '-1'"),
    ({"choices": [GOOD_CHOICE], "usage": {"prompt_tokens": True}}, r"usage\.prompt_tokens is 'True'"),
    ({"choices": [GOOD_CHOICE], "usage": {"prompt_tokens": float("inf")}}, r"usage\.prompt_tokens is 'inf'"),
    ({"choices": [GOOD_CHOICE], "usage": [3]}, r"usage is \[3\]; expected an object"),
])
def test_bad_answers_are_endpoint_errors(body: dict[str, Any], match: str) -> None:
    with pytest.raises(EndpointError, match=match):
        _answer(body, "chat")


@pytest.mark.parametrize(("choice", "api"), [
    ({"index": "x", "message": {"content": 5}}, "chat"),
    ({"message": "not an object"}, "chat"),
    ({"message": {"content": "Yes"}, "logprobs": {"content": [{"token": "Yes", "logprob": "high",
                                                               "top_logprobs": [{"token": "Yes", "logprob": None},
                                                                                {"token": "No", "logprob": 3.0}]}]}},
     "chat"),
    ({"message": {"content": "Yes"}, "logprobs": {"content": [{"token": "Yes", "logprob": float("nan")}]}}, "chat"),
    ({"text": ["a"], "logprobs": {"tokens": ["a"], "token_logprobs": ["x"], "top_logprobs": "bad"}}, "completions"),
    ({"text": "a", "logprobs": {"tokens": ["a"], "top_logprobs": [{"a": float("nan"), "b": -0.5}]}}, "completions"),
])
def test_odd_choices_give_a_sane_completion(choice: dict[str, Any], api: str) -> None:
    done = _answer({"choices": [choice], "usage": {"prompt_tokens": 3.0, "completion_tokens": 1}}, api)
    assert done.prompt_tokens == 3 and isinstance(done.prompt_tokens, int) and done.completion_tokens == 1
    (only,) = done.choices
    assert isinstance(only.text, str)
    for value in (only.first_top_logprobs or {}).values():
        assert isinstance(value, float) and not math.isnan(value) and value <= 0

"""Errors of /v1/chat/completions in OpenAI's shape, and the fields the mesh refuses rather than ignores."""

import pytest

from gateway.http.errors import ApiError, FieldError, openai_error_body
from gateway.openai_api.chat_protocol import ChatCompletionRequest
from gateway.openai_api.completions import unsupported

BASE = {"model": "local", "messages": [{"role": "user", "content": "안녕"}]}


def test_a_mesh_error_becomes_openais_shape_naming_the_field():
    err = ApiError(400, "invalid_argument", "invalid complete request",
                   fields=[FieldError(field="options.max_tokens", description="must be 1..2048")])
    body = openai_error_body(err)["error"]
    assert body == {"message": "invalid complete request (options.max_tokens: must be 1..2048)",
                    "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_argument"}


def test_context_and_unknown_fields_get_their_own_codes():
    context = ApiError(400, "invalid_argument", "too long", fields=[
        FieldError(field="messages", description="context_length_exceeded: local: exceeds the context")])
    assert openai_error_body(context)["error"]["code"] == "context_length_exceeded"
    extra = ApiError(400, "invalid_argument", "request does not match the schema",
                     fields=[FieldError(field="best_of", description="Extra inputs are not permitted")])
    assert openai_error_body(extra)["error"] | {"message": ""} == {
        "message": "", "type": "invalid_request_error", "param": "best_of", "code": "unsupported_parameter"}
    assert openai_error_body(ApiError(502, "schema_violation", "broke twice"))["error"]["type"] == "server_error"
    assert openai_error_body(ApiError(429, "overloaded", "busy"))["error"]["type"] == "rate_limit_error"


@pytest.mark.parametrize("field,value", [("n", 2), ("logprobs", True), ("top_logprobs", 2),
                                         ("frequency_penalty", 0.1), ("presence_penalty", -1.0),
                                         ("logit_bias", {"1": 2.0})])
def test_unsupported_values_are_refused_naming_the_field(field, value):
    with pytest.raises(ApiError) as info:
        unsupported(ChatCompletionRequest(**BASE, **{field: value}))
    assert info.value.status == 400 and info.value.body.error.fields[0].field == field


def test_the_values_openai_clients_send_by_default_pass():
    unsupported(ChatCompletionRequest(**BASE, n=1, logprobs=False, frequency_penalty=0, presence_penalty=0.0))
    with pytest.raises(ApiError, match="json_schema"):
        unsupported(ChatCompletionRequest(**BASE, response_format={"type": "json_schema",
                                                                   "json_schema": {"name": "x"}}))

"""Errors a served request ends with, in the OpenAI error shape: ``{"error": {message, type, param, code}}``."""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError", "error_body"]

#: The OpenAI ``type`` of each HTTP status the server answers errors with.
ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
               405: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
               429: "rate_limit_error", 500: "server_error", 502: "upstream_error", 503: "server_error",
               504: "timeout_error"}


class ApiError(Exception):
    """A request that cannot be answered: HTTP ``status`` and one clear ``message`` (no traceback)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        #: More top-level fields of the body (e.g. ``coba``: the path of a request whose endpoint failed).
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        """The JSON body of the error answer."""
        return error_body(self.status, self.message, param=self.param, code=self.code, extra=self.extra)


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as the OpenAI API writes it (message on one line)."""
    line = " ".join(str(message).split())
    return {"error": {"message": line, "type": ERROR_TYPES.get(status, "invalid_request_error"), "param": param,
                      "code": code}, **(extra or {})}

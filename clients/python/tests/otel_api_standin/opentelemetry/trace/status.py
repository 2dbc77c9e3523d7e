"""Stand-in of opentelemetry.trace.status (see ../../README.md)."""

import enum
import typing


class StatusCode(enum.Enum):
    UNSET = 0
    OK = 1
    ERROR = 2


class Status:
    def __init__(self, status_code: StatusCode = StatusCode.UNSET, description: typing.Optional[str] = None) -> None:
        self._status_code = status_code
        # As the real API: a description goes only with ERROR.
        self._description = description if status_code is StatusCode.ERROR else None

    @property
    def status_code(self) -> StatusCode:
        return self._status_code

    @property
    def description(self) -> typing.Optional[str]:
        return self._description

    @property
    def is_ok(self) -> bool:
        return self._status_code is not StatusCode.ERROR

    @property
    def is_unset(self) -> bool:
        return self._status_code is StatusCode.UNSET

"""Stand-in of opentelemetry.context (see ../../README.md): immutable contexts in a contextvar."""

import contextvars
import typing
import uuid


class Context(typing.Dict[str, object]):
    """An immutable mapping; set_value returns a new one."""

    def __setitem__(self, key: str, value: object) -> None:
        raise ValueError("Context is immutable")


_CURRENT: "contextvars.ContextVar[Context]" = contextvars.ContextVar("current_context", default=Context())


def create_key(keyname: str) -> str:
    return keyname + "-" + str(uuid.uuid4())


def get_value(key: str, context: typing.Optional[Context] = None) -> object:
    return context.get(key) if context is not None else get_current().get(key)


def set_value(key: str, value: object, context: typing.Optional[Context] = None) -> Context:
    if context is None:
        context = get_current()
    new_values = context.copy()
    new_values[key] = value
    return Context(new_values)


def get_current() -> Context:
    return _CURRENT.get()


def attach(context: Context) -> object:
    return _CURRENT.set(context)


def detach(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]

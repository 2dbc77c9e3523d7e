"""Stand-in of opentelemetry.propagators.textmap (see ../../README.md): the default getter and setter."""

import typing


class DefaultGetter:
    def get(self, carrier: typing.Mapping[str, typing.Any], key: str) -> typing.Optional[typing.List[str]]:
        val = carrier.get(key, None)
        if val is None:
            return None
        if isinstance(val, typing.Iterable) and not isinstance(val, str):
            return list(val)
        return [val]

    def keys(self, carrier: typing.Mapping[str, typing.Any]) -> typing.List[str]:
        return list(carrier.keys())


class DefaultSetter:
    def set(self, carrier: typing.MutableMapping[str, typing.Any], key: str, value: str) -> None:
        carrier[key] = value


default_getter = DefaultGetter()
default_setter = DefaultSetter()

/**
 * Payloads and results travel as google.protobuf.Value (any JSON value:
 * docs/api.md "Bounds"). These convert between that message and plain JSON,
 * so producers and handlers never build Value messages by hand.
 */
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

/** A plain JSON value as a google.protobuf.Value, e.g. for `submit({ payload: jsonToValue({...}) })`. */
export function jsonToValue(json: JsonValue): Value {
  return fromJson(ValueSchema, json);
}

/** A google.protobuf.Value (a job's payload or result) as plain JSON; absent is `null`. */
export function valueToJson(value: Value | undefined): JsonValue {
  return value === undefined ? null : toJson(ValueSchema, value);
}

package leasequeue

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Limits of docs/api.md "Bounds".
const (
	maxJSONBytes     = 64 * 1024 // a payload or result as compact JSON
	maxProgressBytes = 4 * 1024  // a progress report
	maxJSONDepth     = 32        // `1` is level 0, `[1]` level 1
	maxTextChars     = 4096      // an error text
	maxAcks          = 1000      // per Acknowledge request or Work message
)

// jsonValue turns any value encoding/json can marshal into a Value, after
// the checks the server makes (size as compact JSON, nesting); the error
// names field.
func jsonValue(v any, field string, maxBytes int) (*structpb.Value, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: is not JSON: %v", field, err)
	}
	if len(raw) > maxBytes {
		return nil, fmt.Errorf("%s: is %d bytes of JSON; the limit is %d bytes", field, len(raw), maxBytes)
	}
	if jsonDepth(raw) > maxJSONDepth {
		return nil, fmt.Errorf("%s: is nested more than %d levels deep", field, maxJSONDepth)
	}
	var value structpb.Value
	if err := protojson.Unmarshal(raw, &value); err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	return &value, nil
}

// jsonDepth is the nesting of compact JSON text as docs/api.md counts it.
func jsonDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			if depth > deepest {
				deepest = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// valueOf is a Value as plain Go (encoding/json's types: float64 numbers,
// map[string]any, []any), nil for none.
func valueOf(v *structpb.Value) any {
	if v == nil {
		return nil
	}
	return v.AsInterface()
}

// decodeValue unmarshals a Value into dst as encoding/json would the same JSON.
func decodeValue(v *structpb.Value, dst any) error {
	raw := []byte("null")
	if v != nil {
		var err error
		if raw, err = protojson.Marshal(v); err != nil {
			return err
		}
	}
	return json.Unmarshal(raw, dst)
}

// truncate keeps an error text within what the server stores.
func truncate(text string) string {
	if utf8.RuneCountInString(text) <= maxTextChars {
		return text
	}
	runes := []rune(text)
	return string(runes[:maxTextChars-1]) + "…"
}

func checkDelay(field string, d time.Duration) error {
	if d < 0 || d > maxDelay {
		return fmt.Errorf("%s: must be within 0..720h (30 days), got %s", field, d)
	}
	return nil
}

package mgmt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/warren/amqp"
)

var errEOF = io.EOF

func splitHostPort(addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, ""
	}
	return h, p
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// tableJSON converts an AMQP field table to JSON values as RabbitMQ shows
// them: numbers as numbers, timestamps as Unix seconds, byte arrays as
// strings, nested tables as objects. It never returns nil, so an empty
// table is {} as in RabbitMQ.
func tableJSON(t map[string]any) table {
	out := make(table, len(t))
	for k, v := range t {
		out[k] = valueJSON(v)
	}
	return out
}

func valueJSON(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return tableJSON(v)
	case map[string]any:
		return tableJSON(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = valueJSON(x)
		}
		return out
	case []byte:
		return string(v)
	case time.Time:
		return v.Unix()
	case amqp.Decimal:
		return float64(v.Value) / math.Pow10(int(v.Scale))
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil
		}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	return v
}

// tableFromJSON converts JSON arguments or headers (decoded with UseNumber)
// to an AMQP table: integral numbers become 64-bit integers and other
// numbers doubles, as RabbitMQ converts them.
func tableFromJSON(m map[string]any) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		x, err := valueFromJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = x
	}
	return out, nil
}

func valueFromJSON(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, err
		}
		return f, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), nil
		}
		return v, nil
	case map[string]any:
		t, err := tableFromJSON(v)
		if t == nil && err == nil {
			t = map[string]any{}
		}
		return amqp.Table(t), err
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			y, err := valueFromJSON(x)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	case string, bool, nil:
		return v, nil
	}
	return nil, fmt.Errorf("unsupported value %T", v)
}

// encodeTable encodes a table as AMQP does, for hashing.
func encodeTable(t map[string]any) ([]byte, error) {
	return amqp.AppendTable(nil, amqp.Table(t))
}

// propsJSON converts content properties to RabbitMQ's JSON: only the
// properties present.
func propsJSON(raw []byte) table {
	out := table{}
	p, err := amqp.DecodeProperties(raw)
	if err != nil {
		return out
	}
	str := func(flag uint16, name, v string) {
		if p.Flags&flag != 0 {
			out[name] = v
		}
	}
	str(amqp.FlagContentType, "content_type", p.ContentType)
	str(amqp.FlagContentEncoding, "content_encoding", p.ContentEncoding)
	if p.Flags&amqp.FlagHeaders != 0 {
		out["headers"] = tableJSON(p.Headers)
	}
	if p.Flags&amqp.FlagDeliveryMode != 0 {
		out["delivery_mode"] = p.DeliveryMode
	}
	if p.Flags&amqp.FlagPriority != 0 {
		out["priority"] = p.Priority
	}
	str(amqp.FlagCorrelationID, "correlation_id", p.CorrelationID)
	str(amqp.FlagReplyTo, "reply_to", p.ReplyTo)
	str(amqp.FlagExpiration, "expiration", p.Expiration)
	str(amqp.FlagMessageID, "message_id", p.MessageID)
	if p.Flags&amqp.FlagTimestamp != 0 {
		out["timestamp"] = p.Timestamp.Unix()
	}
	str(amqp.FlagType, "type", p.Type)
	str(amqp.FlagUserID, "user_id", p.UserID)
	str(amqp.FlagAppID, "app_id", p.AppID)
	str(amqp.FlagClusterID, "cluster_id", p.ClusterID)
	return out
}

// propsFromJSON builds content properties from RabbitMQ's JSON form.
func propsFromJSON(m map[string]any) (amqp.Properties, error) {
	var p amqp.Properties
	for k, v := range m {
		switch k {
		case "headers":
			h, ok := v.(map[string]any)
			if !ok {
				return p, fmt.Errorf("properties.headers: want an object")
			}
			t, err := tableFromJSON(h)
			if err != nil {
				return p, fmt.Errorf("properties.headers.%w", err)
			}
			p.Headers, p.Flags = amqp.Table(t), p.Flags|amqp.FlagHeaders
		case "delivery_mode", "priority", "timestamp":
			n, err := intJSON(v)
			if err != nil {
				return p, fmt.Errorf("properties.%s: %w", k, err)
			}
			switch k {
			case "delivery_mode":
				p.DeliveryMode, p.Flags = uint8(n), p.Flags|amqp.FlagDeliveryMode
			case "priority":
				p.Priority, p.Flags = uint8(n), p.Flags|amqp.FlagPriority
			default:
				p.Timestamp, p.Flags = time.Unix(n, 0), p.Flags|amqp.FlagTimestamp
			}
		default:
			s, ok := v.(string)
			if !ok {
				// RabbitMQ takes numbers for string properties too
				// (expiration in particular).
				if n, err := intJSON(v); err == nil {
					s, ok = strconv.FormatInt(n, 10), true
				}
			}
			if !ok {
				return p, fmt.Errorf("properties.%s: want a string", k)
			}
			if err := setStringProp(&p, k, s); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

func setStringProp(p *amqp.Properties, name, s string) error {
	var dst *string
	var flag uint16
	switch name {
	case "content_type":
		dst, flag = &p.ContentType, amqp.FlagContentType
	case "content_encoding":
		dst, flag = &p.ContentEncoding, amqp.FlagContentEncoding
	case "correlation_id":
		dst, flag = &p.CorrelationID, amqp.FlagCorrelationID
	case "reply_to":
		dst, flag = &p.ReplyTo, amqp.FlagReplyTo
	case "expiration":
		dst, flag = &p.Expiration, amqp.FlagExpiration
	case "message_id":
		dst, flag = &p.MessageID, amqp.FlagMessageID
	case "type":
		dst, flag = &p.Type, amqp.FlagType
	case "user_id":
		dst, flag = &p.UserID, amqp.FlagUserID
	case "app_id":
		dst, flag = &p.AppID, amqp.FlagAppID
	case "cluster_id":
		dst, flag = &p.ClusterID, amqp.FlagClusterID
	default:
		return fmt.Errorf("unknown message property '%s'", name)
	}
	*dst, p.Flags = s, p.Flags|flag
	return nil
}

func intJSON(v any) (int64, error) {
	switch v := v.(type) {
	case json.Number:
		return v.Int64()
	case float64:
		return int64(v), nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("want an integer, got %T", v)
}

// payloadJSON renders a body as RabbitMQ's get does: as a string when the
// encoding is "auto" and the body is valid UTF-8, else base64.
func payloadJSON(body []byte, encoding string, truncate int) (string, string) {
	if truncate > 0 && len(body) > truncate {
		body = body[:truncate]
	}
	if encoding != "base64" && utf8.Valid(body) {
		return string(body), "string"
	}
	return base64.StdEncoding.EncodeToString(body), "base64"
}

// flexBool is a JSON boolean that also accepts the strings "true" and
// "false", as RabbitMQ does (rabbitmqadmin sends them); Set reports
// whether the field was present.
type flexBool struct {
	Set   bool
	Value bool
}

func (b *flexBool) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "true", `"true"`:
		*b = flexBool{true, true}
	case "false", `"false"`:
		*b = flexBool{true, false}
	case "null":
	default:
		return fmt.Errorf("want true or false, got %s", data)
	}
	return nil
}

// or returns the value, or def when absent.
func (b flexBool) or(def bool) bool {
	if b.Set {
		return b.Value
	}
	return def
}

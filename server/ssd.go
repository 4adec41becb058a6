package server

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/exchange"
)

// Sender-selected distribution, as RabbitMQ's rabbit_basic:message/3 does
// it: the CC and BCC headers of a published message, arrays of longstr,
// are routing keys besides the publish's own (other array elements are
// ignored); each queue gets the message once; BCC is removed from the
// message before it is stored or delivered, CC is kept.

// The headers as they appear in an encoded table: a shortstr name. A
// properties block holding neither is not decoded at all.
var (
	ssdCC  = []byte("\x02CC")
	ssdBCC = []byte("\x03BCC")
)

// senderSelected reads p's CC and BCC headers into p.cc and strips BCC from
// p.props. A CC or BCC header that is not an array is a 406, in RabbitMQ's
// words.
func (p *publishing) senderSelected() error {
	if len(p.props) < 2 || binary.BigEndian.Uint16(p.props)&amqp.FlagHeaders == 0 ||
		!bytes.Contains(p.props, ssdCC) && !bytes.Contains(p.props, ssdBCC) {
		return nil
	}
	h, err := amqp.PropHeaders(p.props)
	if err != nil {
		return nil
	}
	for _, name := range [...]string{"CC", "BCC"} {
		v, ok := h[name]
		if !ok {
			continue
		}
		keys, ok := v.([]any)
		if !ok {
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0,
				"invalid message: {unacceptable_type_in_header,\"%s\",%s}", name, amqp.FieldTypeName(v))
		}
		for _, k := range keys {
			if s, ok := k.(string); ok {
				p.cc = append(p.cc, s)
			}
		}
	}
	if _, ok := h["BCC"]; ok {
		props, err := amqp.DecodeProperties(p.props)
		if err != nil {
			return nil
		}
		delete(props.Headers, "BCC")
		if b, err := props.Append(nil); err == nil {
			p.props = b
		}
	}
	return nil
}

// routePublish is routeMessage for a publish with sender-selected keys:
// the queues of key and of every key in cc, each once. Each exchange routes
// all the keys together, so its alternate exchange is used only when none
// matches (exchange.RouteAllCC).
func (v *vhost) routePublish(exName, key string, cc []string, props []byte) *routeScratch {
	if len(cc) == 0 {
		return v.routeMessage(exName, key, props)
	}
	s := v.scratchPool.Get().(*routeScratch)
	s.names, s.queues = s.names[:0], s.queues[:0]
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.exchanges[exName]
	s.found = e != nil
	if e == nil {
		return s
	}
	if exName == "" {
		for i := -1; i < len(cc); i++ {
			k := key
			if i >= 0 {
				k = cc[i]
			}
			if q := v.queues[k]; q != nil && !slices.Contains(s.queues, q) {
				s.queues = append(s.queues, q)
			}
		}
		return s
	}
	var h map[string]any
	if v.headersExchanges > 0 {
		h, _ = amqp.PropHeaders(props)
	}
	s.names = exchange.RouteAllCC(v.lookup, e, key, cc, h, &s.ex, s.names)
	for _, n := range s.names {
		if q := v.queues[n]; q != nil {
			s.queues = append(s.queues, q)
		}
	}
	return s
}

// headerCC returns the longstr elements of props' CC header.
func headerCC(props []byte) []string {
	if !bytes.Contains(props, ssdCC) {
		return nil
	}
	h, _ := amqp.PropHeaders(props)
	keys, _ := h["CC"].([]any)
	var cc []string
	for _, k := range keys {
		if s, ok := k.(string); ok {
			cc = append(cc, s)
		}
	}
	return cc
}

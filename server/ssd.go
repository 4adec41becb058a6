package server

import (
	"bytes"
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
	raw := p.idx.HeadersRaw(p.props)
	if !bytes.Contains(raw, ssdCC) && !bytes.Contains(raw, ssdBCC) {
		return nil
	}
	h := p.headerTable()
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
			p.setProps(b)
		}
	}
	return nil
}

// routePublish is routeMessage for a publish with sender-selected keys:
// the queues of key and of every key in cc, each once. Each exchange routes
// all the keys together, so its alternate exchange is used only when none
// matches (exchange.RouteAllCC).
func (v *vhost) routePublish(exName, key string, cc []string, headers func() map[string]any) *routeScratch {
	if len(cc) == 0 {
		s, _, found := v.route(exName, key, headers)
		s.found = found
		return s
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
		h = headers()
	}
	s.names = exchange.RouteAllCC(v.lookup, e, key, cc, h, &s.ex, s.names)
	for _, n := range s.names {
		if q := v.queues[n]; q != nil {
			s.queues = append(s.queues, q)
		}
	}
	return s
}

// ccKeys returns the longstr elements of the CC header in h.
func ccKeys(h map[string]any) []string {
	keys, _ := h["CC"].([]any)
	var cc []string
	for _, k := range keys {
		if s, ok := k.(string); ok {
			cc = append(cc, s)
		}
	}
	return cc
}

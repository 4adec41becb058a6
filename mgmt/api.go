package mgmt

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
)

func (s *Server) apiRoutes() []route {
	r := func(method, pattern string, h func(*request) error) route {
		return route{method: method, pattern: strings.Split(strings.Trim(pattern, "/"), "/"), h: h}
	}
	get, put, del, post := http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPost
	admin := func(rt route) route { rt.access = accessAdmin; return rt }
	monitor := func(rt route) route { rt.access = accessMonitor; return rt }
	policy := func(rt route) route { rt.access = accessPolicy; return rt }
	own := func(rt route) route { rt.scope = scopeOwn; return rt }
	vhostNames := func(rt route) route { rt.scope = scopeVHostName; return rt }
	// heavy: the route walks every object of a kind (a list, the sampler's
	// reading of every queue's counters, a vhost's bindings).
	heavy := func(rt route) route { rt.heavy = true; return rt }
	bulk := func(rt route) route { rt.heavy, rt.bulk = true, true; return rt }
	ownVHost := func(rt route) route { rt.ownVHostCheck = true; return rt }
	return []route{
		heavy(r(get, "overview", s.getOverview)),
		monitor(r(get, "nodes", s.getNodes)),
		monitor(r(get, "nodes/{node}", s.getNode)),
		monitor(r(get, "cluster", s.getCluster)),
		admin(r(del, "cluster/nodes/{node}", s.deleteClusterNode)),
		admin(r(get, "nodes/{node}/environment", s.getEnvironment)),
		vhostNames(heavy(r(get, "vhosts", s.getVHosts))),
		heavy(admin(r(get, "vhosts/{vhost}", s.getVHost))),
		admin(ownVHost(r(put, "vhosts/{vhost}", s.putVHost))),
		admin(r(del, "vhosts/{vhost}", s.deleteVHost)),
		admin(r(get, "vhosts/{vhost}/permissions", s.getPermissions)),
		admin(r(get, "vhosts/{vhost}/topic-permissions", s.getTopicPermissions)),
		admin(heavy(r(get, "users", s.getUsers))),
		admin(heavy(r(get, "users/without-permissions", s.getUsersWithoutPermissions))),
		admin(r(post, "users/bulk-delete", s.bulkDeleteUsers)),
		admin(r(get, "users/{user}", s.getUser)),
		admin(r(put, "users/{user}", s.putUser)),
		admin(r(del, "users/{user}", s.deleteUser)),
		admin(r(get, "users/{user}/permissions", s.getPermissions)),
		admin(r(get, "users/{user}/topic-permissions", s.getTopicPermissions)),
		r(get, "whoami", s.getWhoami),
		admin(heavy(r(get, "permissions", s.getPermissions))),
		admin(r(get, "permissions/{vhost}/{user}", s.getPermission)),
		admin(ownVHost(r(put, "permissions/{vhost}/{user}", s.putPermission))),
		admin(r(del, "permissions/{vhost}/{user}", s.deletePermission)),
		admin(heavy(r(get, "topic-permissions", s.getTopicPermissions))),
		admin(r(get, "topic-permissions/{vhost}/{user}", s.getTopicPermission)),
		admin(ownVHost(r(put, "topic-permissions/{vhost}/{user}", s.putTopicPermission))),
		admin(r(del, "topic-permissions/{vhost}/{user}", s.deleteTopicPermission)),
		r(get, "vhost-limits", s.getVHostLimits),
		r(get, "vhost-limits/{vhost}", s.getVHostLimits),
		admin(ownVHost(r(put, "vhost-limits/{vhost}/{name}", s.putVHostLimit))),
		admin(r(del, "vhost-limits/{vhost}/{name}", s.deleteVHostLimit)),
		admin(r(get, "user-limits", s.getUserLimits)),
		admin(r(get, "user-limits/{user}", s.getUserLimits)),
		admin(r(put, "user-limits/{user}/{name}", s.putUserLimit)),
		admin(r(del, "user-limits/{user}/{name}", s.deleteUserLimit)),
		heavy(r(get, "policies", s.getPolicies)),
		heavy(r(get, "policies/{vhost}", s.getPolicies)),
		r(get, "policies/{vhost}/{name}", s.getPolicy),
		policy(r(put, "policies/{vhost}/{name}", s.putPolicy)),
		policy(r(del, "policies/{vhost}/{name}", s.deletePolicy)),
		r(get, "operator-policies", s.getEmptyList),
		r(get, "parameters", s.getEmptyList),
		r(get, "global-parameters", s.getEmptyList),
		r(get, "extensions", s.getEmptyList),
		r(get, "healthchecks/node", s.getHealth),
		r(get, "health/checks/alarms", s.getAlarms),
		r(get, "health/checks/local-alarms", s.getAlarms),
		r(get, "aliveness-test/{vhost}", s.getAliveness),

		heavy(r(get, "exchanges", s.getExchanges)),
		heavy(r(get, "exchanges/{vhost}", s.getExchanges)),
		r(get, "exchanges/{vhost}/{name}", s.getExchange),
		r(put, "exchanges/{vhost}/{name}", s.putExchange),
		r(del, "exchanges/{vhost}/{name}", s.deleteExchange),
		bulk(r(post, "exchanges/{vhost}/{name}/publish", s.publish)),
		heavy(r(get, "exchanges/{vhost}/{name}/bindings/source", s.getExchangeBindings)),
		heavy(r(get, "exchanges/{vhost}/{name}/bindings/destination", s.getExchangeBindings)),

		heavy(r(get, "queues", s.getQueues)),
		heavy(r(get, "queues/{vhost}", s.getQueues)),
		heavy(r(get, "queues/{vhost}/{name}", s.getQueue)),
		r(put, "queues/{vhost}/{name}", s.putQueue),
		r(del, "queues/{vhost}/{name}", s.deleteQueue),
		r(del, "queues/{vhost}/{name}/contents", s.purgeQueue),
		heavy(r(post, "queues/{vhost}/{name}/get", s.getMessages)),
		heavy(r(get, "queues/{vhost}/{name}/bindings", s.getQueueBindings)),

		heavy(r(get, "bindings", s.getBindings)),
		heavy(r(get, "bindings/{vhost}", s.getBindings)),
		heavy(r(get, "bindings/{vhost}/e/{source}/q/{dest}", s.getBindingsBetween("queue"))),
		heavy(r(get, "bindings/{vhost}/e/{source}/e/{dest}", s.getBindingsBetween("exchange"))),
		heavy(r(post, "bindings/{vhost}/e/{source}/q/{dest}", s.postBinding("queue"))),
		heavy(r(post, "bindings/{vhost}/e/{source}/e/{dest}", s.postBinding("exchange"))),
		heavy(r(put, "bindings/{vhost}/e/{source}/q/{dest}", s.postBinding("queue"))),
		heavy(r(put, "bindings/{vhost}/e/{source}/e/{dest}", s.postBinding("exchange"))),
		heavy(r(del, "bindings/{vhost}/e/{source}/q/{dest}", s.deleteBindingByBody("queue"))),
		heavy(r(del, "bindings/{vhost}/e/{source}/e/{dest}", s.deleteBindingByBody("exchange"))),
		heavy(r(get, "bindings/{vhost}/e/{source}/q/{dest}/{props}", s.getBinding("queue"))),
		heavy(r(get, "bindings/{vhost}/e/{source}/e/{dest}/{props}", s.getBinding("exchange"))),
		heavy(r(del, "bindings/{vhost}/e/{source}/q/{dest}/{props}", s.deleteBinding("queue"))),
		heavy(r(del, "bindings/{vhost}/e/{source}/e/{dest}/{props}", s.deleteBinding("exchange"))),

		own(heavy(r(get, "connections", s.getConnections))),
		r(get, "connections/{name}", s.getConnection),
		r(del, "connections/{name}", s.closeConnection),
		own(heavy(r(get, "connections/{name}/channels", s.getConnectionChannels))),
		own(heavy(r(get, "vhosts/{vhost}/connections", s.getConnections))),
		own(heavy(r(get, "channels", s.getChannels))),
		own(heavy(r(get, "vhosts/{vhost}/channels", s.getChannels))),
		heavy(r(get, "consumers", s.getConsumers)),
		heavy(r(get, "consumers/{vhost}", s.getConsumers)),

		admin(heavy(r(get, "definitions", s.getDefinitions))),
		admin(bulk(r(post, "definitions", s.postDefinitions))),
		admin(heavy(r(get, "definitions/{vhost}", s.getDefinitions))),
		admin(bulk(r(post, "definitions/{vhost}", s.postDefinitions))),
	}
}

func (s *Server) getOverview(q *request) error {
	lengths, rates, err := ranges(q)
	if err != nil {
		return err
	}
	o := s.overview()
	if !isMonitor(q.u) {
		// The history is the node's: a restricted view has no samples.
		s.restrictOverview(q, &o)
		return q.reply(o)
	}
	qt := &o.QueueTotals
	qt.MessagesDetails, qt.MessagesReadyDetails, qt.MessagesUnackedDetails = s.sampler.lengthDetails("", lengths)
	if rates != nil {
		o.MessageStats.withSamples(&histSrc{sm: s.sampler, r: *rates})
	}
	return q.reply(o)
}

// ranges reads a request's lengths and msg_rates ranges (nil: not asked
// for).
func ranges(q *request) (lengths, rates *sampleRange, err error) {
	now := time.Now()
	if lengths, err = parseRange(q, "lengths", now); err != nil {
		return nil, nil, err
	}
	if rates, err = parseRange(q, "msg_rates", now); err != nil {
		return nil, nil, err
	}
	return lengths, rates, nil
}

// withHistory adds a queue's length rates, and its samples when asked for.
func (s *Server) withHistory(j *queueJSON, lengths, rates *sampleRange) {
	k := queueKey(j.VHost, j.Name)
	j.MessagesDetails, j.MessagesReadyDetails, j.MessagesUnackedDetails = s.sampler.lengthDetails(k, lengths)
	if rates != nil && j.MessageStats != nil {
		j.MessageStats.withSamples(&histSrc{sm: s.sampler, key: k, r: *rates})
	}
}

// restrictOverview limits the totals to what a management or policymaker
// user sees, as RabbitMQ does: the vhosts it has permissions in and its
// own connections and channels.
func (s *Server) restrictOverview(q *request, o *overviewJSON) {
	db := s.broker.Auth()
	o.ObjectTotals, o.QueueTotals = objectTotalsJSON{}, queueTotalsJSON{}
	view, rates := s.stats()
	var c counts
	var r [nCounters]float64
	for _, v := range s.broker.VHostNames() {
		if !db.CanAccessVHost(q.u.Name, v) {
			continue
		}
		if xs, err := s.broker.Exchanges(v); err == nil {
			o.ObjectTotals.Exchanges += len(xs)
		}
		if qs, err := s.broker.Queues(v); err == nil {
			for _, qi := range qs {
				o.ObjectTotals.Queues++
				o.ObjectTotals.Consumers += qi.Consumers
				o.QueueTotals.MessagesReady += qi.Ready
				o.QueueTotals.MessagesUnacknowledged += qi.Unacked
			}
		}
		c.add(view.vhosts[v])
		for i, x := range rates.vhosts[v] {
			r[i] += x
		}
	}
	o.QueueTotals.Messages = o.QueueTotals.MessagesReady + o.QueueTotals.MessagesUnacknowledged
	for _, conn := range s.broker.Connections() {
		if conn.User == q.u.Name {
			o.ObjectTotals.Connections++
			o.ObjectTotals.Channels += conn.Channels
		}
	}
	o.MessageStats = messageStats(c, r, allCounters)
}

func (s *Server) getNodes(q *request) error { return q.reply(s.clusterNodes()) }

func (s *Server) getNode(q *request) error {
	for _, n := range s.clusterNodes() {
		if n.Name == q.param("node") {
			return q.reply(n)
		}
	}
	return notFound()
}

func (s *Server) getVHosts(q *request) error {
	node := s.broker.NodeName()
	view, rates := s.stats()
	oct := s.sampler.vhostOct(s.broker.Connections())
	var out []vhostJSON
	for _, v := range s.broker.VHosts() {
		rec, _ := s.broker.Auth().VHost(v.Name)
		j := toVHost(node, v, rec)
		j.MessageStats = messageStats(view.vhosts[v.Name], rates.vhosts[v.Name], allCounters)
		setOct(&j, oct)
		out = append(out, j)
	}
	return q.replyList(out)
}

func (s *Server) getVHost(q *request) error {
	for _, v := range s.broker.VHosts() {
		if v.Name == q.param("vhost") {
			rec, _ := s.broker.Auth().VHost(v.Name)
			view, rates := s.stats()
			j := toVHost(s.broker.NodeName(), v, rec)
			j.MessageStats = messageStats(view.vhosts[v.Name], rates.vhosts[v.Name], allCounters)
			setOct(&j, s.sampler.vhostOct(s.broker.Connections()))
			return q.reply(j)
		}
	}
	return notFound()
}

func (s *Server) getEmptyList(q *request) error { return q.reply([]any{}) }

func (s *Server) getHealth(q *request) error { return q.reply(map[string]string{"status": "ok"}) }

// getAlarms answers 200 {"status":"ok"} without alarms, else 503 with the
// alarms raised, as RabbitMQ's health check does.
func (s *Server) getAlarms(q *request) error {
	al, node := s.broker.Alarms(), s.broker.NodeName()
	var raised []map[string]string
	if al.Memory {
		raised = append(raised, map[string]string{"node": node, "resource": "memory"})
	}
	if al.Disk {
		raised = append(raised, map[string]string{"node": node, "resource": "disk"})
	}
	if len(raised) == 0 {
		return q.reply(map[string]string{"status": "ok"})
	}
	writeJSON(q.w, http.StatusServiceUnavailable, map[string]any{
		"status": "failed", "reason": "There are alarms in effect in the cluster", "alarms": raised,
	})
	return nil
}

// getAliveness declares the queue aliveness-test, publishes a message to it
// and gets it back, as RabbitMQ's aliveness test does.
func (s *Server) getAliveness(q *request) error {
	a, err := s.admin(q, q.param("vhost"))
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.DeclareQueue(server.QueueDecl{Name: "aliveness-test"}); err != nil {
		return err
	}
	if _, err := a.Publish("", "aliveness-test", amqp.Properties{}, []byte("test_message")); err != nil {
		return err
	}
	msgs, err := a.Get("aliveness-test", 1, server.AckRequeueFalse)
	if err != nil {
		return err
	}
	if len(msgs) != 1 {
		return q.reply(map[string]string{"status": "failed", "reason": "message not routed"})
	}
	return q.reply(map[string]string{"status": "ok"})
}

// vhostParam is the {vhost} path parameter, or "" (all vhosts) when absent.
func vhostParam(q *request) string { return q.param("vhost") }

func (s *Server) getExchanges(q *request) error {
	xs, err := s.broker.Exchanges(vhostParam(q))
	if err != nil {
		return err
	}
	return q.replyList(listOf(xs, toExchange))
}

func (s *Server) getExchange(q *request) error {
	x, err := s.broker.Exchange(q.param("vhost"), q.exchangeParam("name"))
	if err != nil {
		return err
	}
	j := toExchange(x)
	empty := []any{}
	j.Incoming, j.Outgoing = &empty, &empty
	return q.reply(j)
}

func (s *Server) putExchange(q *request) error {
	if err := checkName("exchange", q.param("name"), 255); err != nil {
		return err
	}
	if err := s.precheck(q, auth.Configure, q.param("name")); err != nil {
		return err
	}
	var body struct {
		Type       string         `json:"type"`
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Internal   flexBool       `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Type == "" {
		return badRequest("[{error,{key_missing,type}}]")
	}
	args, err := tableFromJSON(body.Arguments)
	if err != nil {
		return badRequest("arguments: %v", err)
	}
	vhost, name := q.param("vhost"), q.exchangeParam("name")
	_, existed := s.broker.Exchange(vhost, name)
	a, err := s.admin(q, vhost)
	if err != nil {
		return err
	}
	defer a.Close()
	err = a.DeclareExchange(server.ExchangeDecl{
		Name: name, Type: body.Type, Durable: body.Durable.or(true),
		AutoDelete: body.AutoDelete.or(false), Internal: body.Internal.or(false), Args: args,
	})
	if err != nil {
		return err
	}
	return q.noContent(existed != nil)
}

func (s *Server) deleteExchange(q *request) error {
	a, err := s.admin(q, q.param("vhost"))
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.DeleteExchange(q.exchangeParam("name"), q.boolQuery("if-unused")); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) publish(q *request) error {
	vhost, name := q.param("vhost"), q.exchangeParam("name")
	if _, err := s.broker.Exchange(vhost, name); err != nil {
		return err
	}
	if err := s.precheck(q, auth.Write, q.param("name")); err != nil {
		return err
	}
	var body struct {
		Properties      map[string]any `json:"properties"`
		RoutingKey      string         `json:"routing_key"`
		Payload         *string        `json:"payload"`
		PayloadEncoding string         `json:"payload_encoding"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Payload == nil {
		return badRequest("[{error,{key_missing,payload}}]")
	}
	payload := []byte(*body.Payload)
	switch body.PayloadEncoding {
	case "", "string":
	case "base64":
		b, err := base64.StdEncoding.DecodeString(*body.Payload)
		if err != nil {
			return badRequest("payload is not valid base64")
		}
		payload = b
	default:
		return badRequest("payload_encoding must be 'string' or 'base64'")
	}
	props, err := propsFromJSON(body.Properties)
	if err != nil {
		return badRequest("%v", err)
	}
	a, err := s.admin(q, vhost)
	if err != nil {
		return err
	}
	defer a.Close()
	routed, err := a.Publish(name, body.RoutingKey, props, payload)
	if err != nil {
		return err
	}
	return q.reply(map[string]bool{"routed": routed})
}

func (s *Server) getExchangeBindings(q *request) error {
	vhost, name := q.param("vhost"), q.exchangeParam("name")
	if _, err := s.broker.Exchange(vhost, name); err != nil {
		return err
	}
	bs, err := s.broker.Bindings(vhost)
	if err != nil {
		return err
	}
	asSource := strings.HasSuffix(q.r.URL.Path, "/source")
	out := []bindingJSON{}
	for _, b := range bs {
		if (asSource && b.Source == name) || (!asSource && b.DestinationType == "exchange" && b.Destination == name) {
			out = append(out, toBinding(b))
		}
	}
	return q.replyList(out)
}

func (s *Server) ownerIndex() map[string]server.ConnectionInfo {
	m := map[string]server.ConnectionInfo{}
	for _, c := range s.broker.Connections() {
		m[c.Name] = c
	}
	return m
}

func (s *Server) queueJSON(node string, qi server.QueueInfo, owners map[string]server.ConnectionInfo) queueJSON {
	var owner *server.ConnectionInfo
	if c, ok := owners[qi.Owner]; ok && qi.Owner != "" {
		owner = &c
	}
	j := toQueue(node, qi, owner)
	// In a cluster a queue lives on its home node (RabbitMQ's node), down
	// while that node is; a quorum queue's node is its leader (toQueue).
	if home, up := s.broker.QueueHome(qi.VHost, qi.Name); home != "" && qi.Members == nil && qi.Type != "quorum" {
		j.Node = home
		if j.streamQueueJSON != nil {
			// A stream is not replicated: its home is its only member
			// (toQueue named the node answering).
			j.Leader, j.Members, j.Online = home, []string{home}, []string{}
			if up {
				j.Online = []string{home}
			}
		}
		if !up {
			j.State = stateDown
		}
	}
	return j
}

func (s *Server) getQueues(q *request) error {
	lengths, msgRates, err := ranges(q)
	if err != nil {
		return err
	}
	qs, err := s.broker.Queues(vhostParam(q))
	if err != nil {
		return err
	}
	node, owners := s.broker.NodeName(), s.ownerIndex()
	view, rates := s.stats()
	return q.replyList(listOf(qs, func(qi server.QueueInfo) queueJSON {
		j := s.queueJSON(node, qi, owners)
		k := queueKey(qi.VHost, qi.Name)
		j.MessageStats = messageStats(view.queues[k], rates.queues[k], queueCounters)
		s.withHistory(&j, lengths, msgRates)
		return j
	}))
}

func (s *Server) getQueue(q *request) error {
	lengths, msgRates, err := ranges(q)
	if err != nil {
		return err
	}
	vhost, name := q.param("vhost"), q.param("name")
	qi, err := s.broker.Queue(vhost, name)
	if err != nil {
		return err
	}
	node := s.broker.NodeName()
	j := s.queueJSON(node, qi, s.ownerIndex())
	if j.State == stateDown {
		// RabbitMQ 3.10 answers 404 for a queue whose home node is down
		// (its listing shows it, state "down").
		return notFound()
	}
	view, rates := s.stats()
	k := queueKey(qi.VHost, qi.Name)
	j.MessageStats = messageStats(view.queues[k], rates.queues[k], queueCounters)
	s.withHistory(&j, lengths, msgRates)
	cons, _ := s.broker.Consumers(vhost)
	details := []consumerJSON{}
	for _, c := range cons {
		if c.Queue == name {
			details = append(details, toConsumer(node, c))
		}
	}
	empty := []any{}
	j.ConsumerDetails, j.Deliveries, j.Incoming = &details, &empty, &empty
	s.withStream(&j)
	return q.reply(j)
}

func (s *Server) putQueue(q *request) error {
	if err := checkName("queue", q.param("name"), 255); err != nil {
		return err
	}
	if err := s.precheck(q, auth.Configure, q.param("name")); err != nil {
		return err
	}
	var body struct {
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
		Node       string         `json:"node"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	args, err := tableFromJSON(body.Arguments)
	if err != nil {
		return badRequest("arguments: %v", err)
	}
	vhost, name := q.param("vhost"), q.param("name")
	_, existed := s.broker.Queue(vhost, name)
	a, err := s.admin(q, vhost)
	if err != nil {
		return err
	}
	defer a.Close()
	err = a.DeclareQueue(server.QueueDecl{Name: name, Durable: body.Durable.or(true), AutoDelete: body.AutoDelete.or(false), Args: args})
	if err != nil {
		return err
	}
	return q.noContent(existed != nil)
}

func (s *Server) deleteQueue(q *request) error {
	if err := s.checkPerm(q, auth.Configure, "queue", q.param("name")); err != nil {
		return err
	}
	_, err := s.broker.DeleteQueue(q.param("vhost"), q.param("name"), q.boolQuery("if-unused"), q.boolQuery("if-empty"))
	if err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) purgeQueue(q *request) error {
	if err := s.checkPerm(q, auth.Read, "queue", q.param("name")); err != nil {
		return err
	}
	if _, err := s.broker.PurgeQueue(q.param("vhost"), q.param("name")); err != nil {
		return err
	}
	return q.noContent(false)
}

type messageJSON struct {
	PayloadBytes    int    `json:"payload_bytes"`
	Redelivered     bool   `json:"redelivered"`
	Exchange        string `json:"exchange"`
	RoutingKey      string `json:"routing_key"`
	MessageCount    int    `json:"message_count"`
	Properties      table  `json:"properties"`
	Payload         string `json:"payload"`
	PayloadEncoding string `json:"payload_encoding"`
}

func (s *Server) getMessages(q *request) error {
	vhost, name := q.param("vhost"), q.param("name")
	if _, err := s.broker.Queue(vhost, name); err != nil {
		return err
	}
	if err := s.precheck(q, auth.Read, name); err != nil {
		return err
	}
	var body struct {
		Count    any      `json:"count"`
		AckMode  string   `json:"ackmode"`
		Encoding string   `json:"encoding"`
		Truncate any      `json:"truncate"`
		Requeue  flexBool `json:"requeue"` // before RabbitMQ 3.7
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	count := int64(1)
	if body.Count != nil {
		n, err := intJSON(body.Count)
		if err != nil || n < 1 {
			return badRequest("count must be a positive integer")
		}
		count = min(n, 10000)
	}
	mode, ok := server.ParseAckMode(body.AckMode)
	if !ok {
		if body.AckMode != "" || !body.Requeue.Set {
			return badRequest("ackmode must be one of ack_requeue_true, ack_requeue_false, reject_requeue_true, reject_requeue_false")
		}
		mode = server.AckRequeueTrue
		if !body.Requeue.Value {
			mode = server.AckRequeueFalse
		}
	}
	switch body.Encoding {
	case "", "auto", "base64":
	default:
		return badRequest("encoding must be 'auto' or 'base64'")
	}
	truncate := int64(0)
	if body.Truncate != nil {
		n, err := intJSON(body.Truncate)
		if err != nil {
			return badRequest("truncate must be an integer")
		}
		truncate = n
	}
	a, err := s.admin(q, vhost)
	if err != nil {
		return err
	}
	defer a.Close()
	msgs, err := a.Get(name, int(count), mode)
	if err != nil {
		return err
	}
	out := make([]messageJSON, 0, len(msgs))
	for _, m := range msgs {
		payload, enc := payloadJSON(m.Body, body.Encoding, int(truncate))
		out = append(out, messageJSON{
			PayloadBytes: len(m.Body), Redelivered: m.Redelivered, Exchange: m.Exchange, RoutingKey: m.RoutingKey,
			MessageCount: m.MessageCount, Properties: propsJSON(m.Props), Payload: payload, PayloadEncoding: enc,
		})
	}
	return q.reply(out)
}

func (s *Server) getQueueBindings(q *request) error {
	bs, err := s.broker.QueueBindings(q.param("vhost"), q.param("name"))
	if err != nil {
		return err
	}
	out := make([]bindingJSON, 0, len(bs))
	for _, b := range bs {
		out = append(out, toBinding(b))
	}
	return q.replyList(out)
}

func (s *Server) getBindings(q *request) error {
	bs, err := s.broker.Bindings(vhostParam(q))
	if err != nil {
		return err
	}
	return q.replyList(listOf(bs, toBinding))
}

// between lists the bindings from {source} to {dest} of destType, after
// checking that both exist.
func (s *Server) between(q *request, destType string) ([]server.BindingInfo, error) {
	vhost, src, dst := q.param("vhost"), q.exchangeParam("source"), q.param("dest")
	if _, err := s.broker.Exchange(vhost, src); err != nil {
		return nil, err
	}
	if destType == "queue" {
		if _, err := s.broker.Queue(vhost, dst); err != nil {
			return nil, err
		}
	} else if _, err := s.broker.Exchange(vhost, dst); err != nil {
		return nil, err
	}
	all, err := s.broker.Bindings(vhost)
	if err != nil {
		return nil, err
	}
	var out []server.BindingInfo
	for _, b := range all {
		if b.Source == src && b.Destination == dst && b.DestinationType == destType {
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *Server) getBindingsBetween(destType string) func(*request) error {
	return func(q *request) error {
		bs, err := s.between(q, destType)
		if err != nil {
			return err
		}
		out := make([]bindingJSON, 0, len(bs))
		for _, b := range bs {
			out = append(out, toBinding(b))
		}
		return q.reply(out)
	}
}

func (s *Server) getBinding(destType string) func(*request) error {
	return func(q *request) error {
		bs, err := s.between(q, destType)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if propertiesKey(b.RoutingKey, b.Args) == q.param("props") {
				return q.reply(toBinding(b))
			}
		}
		return notFound()
	}
}

// postBinding creates a binding and answers 201 with its location, as
// RabbitMQ does.
func (s *Server) postBinding(destType string) func(*request) error {
	return func(q *request) error {
		b, err := s.bindingFromBody(q, destType)
		if err != nil {
			return err
		}
		a, err := s.admin(q, b.VHost)
		if err != nil {
			return err
		}
		defer a.Close()
		if err := a.Bind(b); err != nil {
			return err
		}
		q.w.Header().Set("Location", url.PathEscape(propertiesKey(b.RoutingKey, b.Args)))
		return q.noContent(true)
	}
}

// bindingFromBody reads the binding a request names by its path and a JSON
// body {"routing_key": ..., "arguments": ...}, after checking that both
// ends exist.
func (s *Server) bindingFromBody(q *request, destType string) (server.BindingInfo, error) {
	if _, err := s.between(q, destType); err != nil {
		return server.BindingInfo{}, err
	}
	// queue.bind's permissions: write on the destination, read on the
	// source.
	if err := s.precheck(q, auth.Write, q.param("dest")); err != nil {
		return server.BindingInfo{}, err
	}
	if err := s.precheck(q, auth.Read, q.param("source")); err != nil {
		return server.BindingInfo{}, err
	}
	var body struct {
		RoutingKey string         `json:"routing_key"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := q.decode(&body); err != nil {
		return server.BindingInfo{}, err
	}
	args, err := tableFromJSON(body.Arguments)
	if err != nil {
		return server.BindingInfo{}, badRequest("arguments: %v", err)
	}
	return server.BindingInfo{
		VHost: q.param("vhost"), Source: q.exchangeParam("source"), Destination: q.param("dest"),
		DestinationType: destType, RoutingKey: body.RoutingKey, Args: args,
	}, nil
}

func (s *Server) unbind(q *request, b server.BindingInfo) error {
	a, err := s.admin(q, b.VHost)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Unbind(b); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) deleteBinding(destType string) func(*request) error {
	return func(q *request) error {
		bs, err := s.between(q, destType)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if propertiesKey(b.RoutingKey, b.Args) == q.param("props") {
				return s.unbind(q, b)
			}
		}
		return notFound()
	}
}

// deleteBindingByBody deletes the binding named by a JSON body
// {"routing_key": ..., "arguments": ...}, for clients that do not track
// properties keys.
func (s *Server) deleteBindingByBody(destType string) func(*request) error {
	return func(q *request) error {
		b, err := s.bindingFromBody(q, destType)
		if err != nil {
			return err
		}
		if !s.broker.HasBinding(b) {
			return notFound()
		}
		return s.unbind(q, b)
	}
}

func (s *Server) getConnections(q *request) error {
	node := s.broker.NodeName()
	out := []connectionJSON{}
	for _, c := range s.broker.Connections() {
		if v := q.param("vhost"); v == "" || c.VHost == v {
			out = append(out, s.connectionJSON(node, c))
		}
	}
	return q.replyList(out)
}

func (s *Server) getConnection(q *request) error {
	c, err := s.broker.Connection(q.param("name"))
	if err != nil {
		return err
	}
	if c.User != q.u.Name && !isMonitor(q.u) {
		return notAuthorised("User not authorised to access object")
	}
	return q.reply(s.connectionJSON(s.broker.NodeName(), c))
}

// connectionJSON is c with its byte rates.
func (s *Server) connectionJSON(node string, c server.ConnectionInfo) connectionJSON {
	j := toConnection(node, c)
	r := s.sampler.connRate(c.ID)
	j.RecvOctDetails.Rate, j.SendOctDetails.Rate = round1(r[0]), round1(r[1])
	return j
}

func (s *Server) closeConnection(q *request) error {
	c, err := s.broker.Connection(q.param("name"))
	if err != nil {
		return err
	}
	if c.User != q.u.Name && !isAdmin(q.u) {
		return notAuthorised("User not authorised to access object")
	}
	if err := s.broker.CloseConnection(q.param("name"), q.r.Header.Get("X-Reason")); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) channels(filter func(server.ChannelInfo) bool) []channelJSON {
	node, conns := s.broker.NodeName(), s.ownerIndex()
	out := []channelJSON{}
	for _, c := range s.broker.Channels() {
		if filter(c) {
			out = append(out, toChannel(node, c, conns[c.Connection]))
		}
	}
	return out
}

func (s *Server) getChannels(q *request) error {
	v := q.param("vhost")
	return q.replyList(s.channels(func(c server.ChannelInfo) bool { return v == "" || c.VHost == v }))
}

func (s *Server) getConnectionChannels(q *request) error {
	name := q.param("name")
	if _, err := s.broker.Connection(name); err != nil {
		return err
	}
	return q.reply(s.channels(func(c server.ChannelInfo) bool { return c.Connection == name }))
}

func (s *Server) getConsumers(q *request) error {
	cs, err := s.localConsumers(vhostParam(q))
	if err != nil {
		return err
	}
	// As RabbitMQ's, the list is the cluster's: the other running nodes'
	// consumers (on channels of their connections) too.
	return q.replyList(append(cs, s.remoteConsumers(vhostParam(q))...))
}

// checkPerm applies the AMQP permission check to an action the management
// API performs on the broker directly rather than through an admin session.
func (s *Server) checkPerm(q *request, p auth.Perm, kind, name string) error {
	vhost := q.param("vhost")
	if s.broker.Auth().Check(q.u.Name, vhost, p, name) {
		return nil
	}
	if _, err := s.broker.Queue(vhost, name); err != nil && kind == "queue" {
		return err
	}
	return notAuthorised("Access refused.")
}

// precheck refuses, before the request's body is read, an action on the
// resource name (RabbitMQ's name: amq.default for the default exchange)
// that needs permission p, which the user lacks in the path's vhost. The
// action itself is checked again where it runs.
func (s *Server) precheck(q *request, p auth.Perm, name string) error {
	if s.broker.Auth().Check(q.u.Name, q.param("vhost"), p, name) {
		return nil
	}
	return notAuthorised("Access refused.")
}

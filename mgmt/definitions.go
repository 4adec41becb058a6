package mgmt

import (
	"cmp"
	"slices"
	"strings"

	"github.com/warrenmq/warren/server"
)

// Definitions is RabbitMQ's definitions document (rabbitmqctl
// export_definitions, GET /api/definitions). Warren exports users, vhosts,
// permissions, policies, exchanges, queues and bindings, and imports
// policies, exchanges, queues and bindings (users and permissions come from
// the broker's configuration).
type Definitions struct {
	RabbitVersion    string            `json:"rabbit_version,omitempty"`
	RabbitMQVersion  string            `json:"rabbitmq_version,omitempty"`
	ProductName      string            `json:"product_name,omitempty"`
	ProductVersion   string            `json:"product_version,omitempty"`
	Users            []userJSON        `json:"users"`
	VHosts           []vhostDefJSON    `json:"vhosts"`
	Permissions      []permissionJSON  `json:"permissions"`
	TopicPermissions []any             `json:"topic_permissions"`
	Parameters       []any             `json:"parameters"`
	GlobalParameters []any             `json:"global_parameters"`
	Policies         []policyJSON      `json:"policies"`
	Queues           []queueDefJSON    `json:"queues"`
	Exchanges        []exchangeDefJSON `json:"exchanges"`
	Bindings         []bindingDefJSON  `json:"bindings"`
}

type vhostDefJSON struct {
	Name string `json:"name"`
}

type queueDefJSON struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

type exchangeDefJSON struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

type bindingDefJSON struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// systemExchange reports whether an exchange exists in every vhost and is
// therefore not exported.
func systemExchange(name string) bool { return name == "" || strings.HasPrefix(name, "amq.") }

// definitions exports vhost ("" for all). Exclusive queues are left out, as
// RabbitMQ leaves them out.
func (s *Server) definitions(vhost string) (*Definitions, error) {
	var err error
	d := &Definitions{
		RabbitVersion: server.Version(), RabbitMQVersion: server.Version(), ProductName: "Warren",
		ProductVersion: server.Version(), Users: []userJSON{}, VHosts: []vhostDefJSON{}, Permissions: []permissionJSON{},
		TopicPermissions: []any{}, Parameters: []any{}, GlobalParameters: []any{}, Policies: []policyJSON{},
		Queues: []queueDefJSON{}, Exchanges: []exchangeDefJSON{}, Bindings: []bindingDefJSON{},
	}
	if vhost == "" {
		for _, u := range s.broker.Users() {
			h, _ := s.broker.PasswordHash(u)
			d.Users = append(d.Users, toUser(u, h))
		}
		for _, v := range s.broker.VHostNames() {
			d.VHosts = append(d.VHosts, vhostDefJSON{Name: v})
		}
		d.Permissions = s.permissions()
	}
	if d.Policies, err = s.policies(vhost); err != nil {
		return nil, err
	}
	xs, err := s.broker.Exchanges(vhost)
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		if !systemExchange(x.Name) {
			d.Exchanges = append(d.Exchanges, exchangeDefJSON{
				Name: x.Name, VHost: x.VHost, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete,
				Internal: x.Internal, Arguments: tableJSON(x.Args),
			})
		}
	}
	qs, err := s.broker.Queues(vhost)
	if err != nil {
		return nil, err
	}
	exclusive := map[string]bool{}
	for _, q := range qs {
		if q.Exclusive {
			exclusive[q.VHost+"\x00"+q.Name] = true
			continue
		}
		d.Queues = append(d.Queues, queueDefJSON{
			Name: q.Name, VHost: q.VHost, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: tableJSON(q.Args),
		})
	}
	bs, err := s.broker.Bindings(vhost)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		if b.Source == "" || (b.DestinationType == "queue" && exclusive[b.VHost+"\x00"+b.Destination]) {
			continue
		}
		d.Bindings = append(d.Bindings, bindingDefJSON{
			Source: b.Source, VHost: b.VHost, Destination: b.Destination, DestinationType: b.DestinationType,
			RoutingKey: b.RoutingKey, Arguments: tableJSON(b.Args),
		})
	}
	if vhost != "" {
		// A vhost's export carries no vhost fields, as in RabbitMQ.
		for i := range d.Exchanges {
			d.Exchanges[i].VHost = ""
		}
		for i := range d.Queues {
			d.Queues[i].VHost = ""
		}
		for i := range d.Bindings {
			d.Bindings[i].VHost = ""
		}
		for i := range d.Policies {
			d.Policies[i].VHost = ""
		}
	}
	return d, nil
}

func (s *Server) getDefinitions(q *request) error {
	d, err := s.definitions(q.param("vhost"))
	if err != nil {
		return err
	}
	if q.r.URL.Query().Has("download") {
		q.w.Header().Set("Content-Disposition", `attachment; filename="`+q.r.URL.Query().Get("download")+`"`)
	}
	return q.reply(d)
}

// postDefinitions imports policies, then exchanges, queues and bindings
// through the same declarations as AMQP clients (so durable ones are
// stored). Objects that exist already must be equivalent. Users, vhosts
// and permissions in the document are ignored.
func (s *Server) postDefinitions(q *request) error {
	var d Definitions
	if err := q.decode(&d); err != nil {
		return err
	}
	only := q.param("vhost")
	vhostOf := func(v string) string {
		if only != "" {
			return only
		}
		if v == "" {
			return "/"
		}
		return v
	}
	type batch struct {
		policies  []policyJSON
		exchanges []exchangeDefJSON
		queues    []queueDefJSON
		bindings  []bindingDefJSON
	}
	byVHost := map[string]*batch{}
	get := func(v string) *batch {
		b := byVHost[v]
		if b == nil {
			b = &batch{}
			byVHost[v] = b
		}
		return b
	}
	for _, x := range d.Policies {
		get(vhostOf(x.VHost)).policies = append(get(vhostOf(x.VHost)).policies, x)
	}
	for _, x := range d.Exchanges {
		get(vhostOf(x.VHost)).exchanges = append(get(vhostOf(x.VHost)).exchanges, x)
	}
	for _, x := range d.Queues {
		get(vhostOf(x.VHost)).queues = append(get(vhostOf(x.VHost)).queues, x)
	}
	for _, x := range d.Bindings {
		get(vhostOf(x.VHost)).bindings = append(get(vhostOf(x.VHost)).bindings, x)
	}
	vhosts := make([]string, 0, len(byVHost))
	for v := range byVHost {
		vhosts = append(vhosts, v)
	}
	slices.SortFunc(vhosts, cmp.Compare)
	for _, v := range vhosts {
		b := byVHost[v]
		for _, p := range b.policies {
			if err := s.setPolicy(v, p); err != nil {
				return err
			}
		}
		a, err := s.admin(q, v)
		if err != nil {
			return err
		}
		err = importBatch(a, b.exchanges, b.queues, b.bindings)
		a.Close()
		if err != nil {
			return err
		}
	}
	return q.noContent(false)
}

func importBatch(a *server.AdminSession, xs []exchangeDefJSON, qs []queueDefJSON, bs []bindingDefJSON) error {
	for _, x := range xs {
		if systemExchange(x.Name) {
			continue
		}
		args, err := tableFromJSON(x.Arguments)
		if err != nil {
			return badRequest("exchange '%s' arguments: %v", x.Name, err)
		}
		err = a.DeclareExchange(server.ExchangeDecl{
			Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: args,
		})
		if err != nil {
			return err
		}
	}
	for _, x := range qs {
		args, err := tableFromJSON(x.Arguments)
		if err != nil {
			return badRequest("queue '%s' arguments: %v", x.Name, err)
		}
		if err := a.DeclareQueue(server.QueueDecl{Name: x.Name, Durable: x.Durable, AutoDelete: x.AutoDelete, Args: args}); err != nil {
			return err
		}
	}
	for _, x := range bs {
		args, err := tableFromJSON(x.Arguments)
		if err != nil {
			return badRequest("binding arguments: %v", err)
		}
		b := server.BindingInfo{
			Source: x.Source, Destination: x.Destination, DestinationType: x.DestinationType, RoutingKey: x.RoutingKey, Args: args,
		}
		if b.DestinationType == "" {
			b.DestinationType = "queue"
		}
		if err := a.Bind(b); err != nil {
			return err
		}
	}
	return nil
}

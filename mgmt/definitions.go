package mgmt

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
)

// Definitions is RabbitMQ's definitions document, in the layout of
// RabbitMQ 3.10's rabbitmqctl export_definitions (also GET
// /api/definitions): users with their password hashes, vhosts with their
// metadata and limits, permissions, topic permissions, vhost limits again
// as "vhost-limits" parameters, policies, queues, exchanges and bindings.
// Import reads both that layout and the older ones (tags as a string,
// limits as an object).
type Definitions struct {
	RabbitVersion    string                `json:"rabbit_version,omitempty"`
	RabbitMQVersion  string                `json:"rabbitmq_version,omitempty"`
	Users            []userDefJSON         `json:"users"`
	VHosts           []vhostDefJSON        `json:"vhosts"`
	Permissions      []permissionJSON      `json:"permissions"`
	TopicPermissions []topicPermissionJSON `json:"topic_permissions"`
	Parameters       []parameterJSON       `json:"parameters"`
	GlobalParameters []any                 `json:"global_parameters"`
	Policies         []policyJSON          `json:"policies"`
	Queues           []queueDefJSON        `json:"queues"`
	Exchanges        []exchangeDefJSON     `json:"exchanges"`
	Bindings         []bindingDefJSON      `json:"bindings"`
}

// userDefJSON is a user in definitions; Tags is a list on export, a list
// or a comma-separated string on import; Password (plain text) is read
// from hand-written files only.
type userDefJSON struct {
	Name             string         `json:"name"`
	PasswordHash     string         `json:"password_hash"`
	Password         string         `json:"password,omitempty"`
	HashingAlgorithm string         `json:"hashing_algorithm"`
	Tags             any            `json:"tags"`
	Limits           map[string]any `json:"limits"`
}

type vhostDefJSON struct {
	Name     string         `json:"name"`
	Limits   any            `json:"limits"` // [[name, value], ...] as RabbitMQ writes it, or an object
	Metadata *vhostMetaJSON `json:"metadata,omitempty"`
	// Before RabbitMQ 3.8 the metadata sat at the top.
	Description string `json:"description,omitempty"`
	Tags        any    `json:"tags,omitempty"`
}

// parameterJSON is a runtime parameter; Warren keeps "vhost-limits".
type parameterJSON struct {
	Component string         `json:"component"`
	Name      string         `json:"name"`
	Value     map[string]any `json:"value"`
	VHost     string         `json:"vhost"`
}

type queueDefJSON struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Type       string         `json:"type,omitempty"`
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
		RabbitVersion: server.Version(), RabbitMQVersion: server.Version(),
		Users: []userDefJSON{}, VHosts: []vhostDefJSON{}, Permissions: []permissionJSON{},
		TopicPermissions: []topicPermissionJSON{}, Parameters: []parameterJSON{}, GlobalParameters: []any{}, Policies: []policyJSON{},
		Queues: []queueDefJSON{}, Exchanges: []exchangeDefJSON{}, Bindings: []bindingDefJSON{},
	}
	db := s.broker.Auth()
	if vhost == "" {
		for _, u := range db.Users() {
			j := userFromAuth(u)
			d.Users = append(d.Users, userDefJSON{
				Name: j.Name, PasswordHash: j.PasswordHash, HashingAlgorithm: j.HashingAlgorithm, Tags: j.Tags, Limits: j.Limits,
			})
		}
		for _, v := range db.VHosts() {
			tags := v.Tags
			if tags == nil {
				tags = []string{}
			}
			limits := [][]any{}
			for _, k := range slices.Sorted(maps.Keys(v.Limits)) {
				limits = append(limits, []any{k, v.Limits[k]})
			}
			d.VHosts = append(d.VHosts, vhostDefJSON{
				Name: v.Name, Limits: limits, Metadata: &vhostMetaJSON{Description: v.Description, Tags: tags},
			})
			if len(v.Limits) > 0 {
				value := map[string]any{}
				for k, n := range v.Limits {
					value[k] = n
				}
				d.Parameters = append(d.Parameters, parameterJSON{Component: "vhost-limits", Name: "limits", Value: value, VHost: v.Name})
			}
		}
		for _, p := range db.Permissions() {
			d.Permissions = append(d.Permissions, permFromAuth(p))
		}
		for _, p := range db.TopicPermissions() {
			d.TopicPermissions = append(d.TopicPermissions, topicFromAuth(p))
		}
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
			Name: q.Name, VHost: q.VHost, Type: "classic", Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: tableJSON(q.Args),
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

// postDefinitions imports a definitions document (see Import); with a
// vhost in the path, only its policies, exchanges, queues and bindings, into
// that vhost.
func (s *Server) postDefinitions(q *request) error {
	var d Definitions
	if err := q.decode(&d); err != nil {
		return err
	}
	if err := importDefinitions(s.broker, &d, q.param("vhost")); err != nil {
		var he *httpError
		var ae *amqp.Error
		if !errors.As(err, &he) && !errors.As(err, &ae) {
			// A name or hash refused by the access-control model: the
			// document's fault, as RabbitMQ answers it.
			return badRequest("%v", err)
		}
		return err
	}
	return q.noContent(false)
}

// ImportDefinitions applies a definitions document (RabbitMQ's JSON, as
// rabbitmqctl export_definitions writes it) to broker: users, vhosts,
// permissions, topic permissions, vhost limits, then per vhost policies,
// exchanges, queues and bindings. Users and permissions are replaced,
// exchanges and queues declared (an existing one must be equivalent).
// It is RabbitMQ's load_definitions.
func ImportDefinitions(broker *server.Server, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var d Definitions
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("definitions: %w", err)
	}
	return importDefinitions(broker, &d, "")
}

// LoadDefinitionsFile imports the definitions file at path.
func LoadDefinitionsFile(broker *server.Server, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := ImportDefinitions(broker, data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func importDefinitions(broker *server.Server, d *Definitions, only string) error {
	if only == "" {
		if err := importAccess(broker, d); err != nil {
			return err
		}
	}
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
		if _, ok := broker.Auth().VHost(v); !ok {
			return badRequest("vhost '%s' does not exist", v)
		}
		b := byVHost[v]
		for _, p := range b.policies {
			if err := setPolicy(broker, v, p); err != nil {
				return err
			}
		}
		a, done, err := broker.OpenSystemAdmin(v)
		if err != nil {
			return err
		}
		err = importBatch(a, b.exchanges, b.queues, b.bindings)
		done()
		if err != nil {
			return fmt.Errorf("vhost '%s': %w", v, err)
		}
	}
	return nil
}

// limitsFrom reads limits written as an object or as [[name, value], ...].
func limitsFrom(v any) (map[string]int64, error) {
	out := map[string]int64{}
	add := func(k string, n any) error {
		i, err := intJSON(n)
		if err != nil {
			return badRequest("limit %s: %v", k, err)
		}
		out[k] = i
		return nil
	}
	switch t := v.(type) {
	case nil:
	case map[string]any:
		for k, n := range t {
			if err := add(k, n); err != nil {
				return nil, err
			}
		}
	case []any:
		for _, e := range t {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return nil, badRequest("limits must be [name, value] pairs")
			}
			k, ok := pair[0].(string)
			if !ok {
				return nil, badRequest("limit name must be a string")
			}
			if err := add(k, pair[1]); err != nil {
				return nil, err
			}
		}
	default:
		return nil, badRequest("limits must be an object or a list of pairs")
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// importAccess applies users, vhosts (created before anything is put in
// them), permissions, topic permissions and vhost-limits parameters.
func importAccess(broker *server.Server, d *Definitions) error {
	db := broker.Auth()
	for _, u := range d.Users {
		tags, err := tagList(u.Tags)
		if err != nil {
			return fmt.Errorf("user '%s': %w", u.Name, err)
		}
		limits, err := limitsFrom(map[string]any(u.Limits))
		if err != nil {
			return fmt.Errorf("user '%s': %w", u.Name, err)
		}
		rec := auth.User{Name: u.Name, Tags: tags, Hashing: u.HashingAlgorithm, Limits: limits}
		if u.Password != "" && u.PasswordHash == "" {
			rec.Hashing = auth.HashSHA256
			rec.PasswordHash, err = auth.HashPassword(auth.HashSHA256, u.Password)
		} else {
			rec.PasswordHash, err = auth.DecodeHash(u.PasswordHash)
		}
		if err != nil {
			return fmt.Errorf("user '%s': %w", u.Name, err)
		}
		if err := db.PutUser(rec); err != nil {
			return fmt.Errorf("user '%s': %w", u.Name, err)
		}
	}
	for _, v := range d.VHosts {
		rec := auth.VHost{Name: v.Name, Description: v.Description}
		tagsRaw := v.Tags
		if v.Metadata != nil {
			rec.Description, tagsRaw = v.Metadata.Description, v.Metadata.Tags
		}
		tags, err := tagList(tagsRaw)
		if err != nil {
			return fmt.Errorf("vhost '%s': %w", v.Name, err)
		}
		rec.Tags = tags
		if old, ok := db.VHost(v.Name); ok {
			rec.DefaultQueueType = old.DefaultQueueType
		}
		if rec.Limits, err = limitsFrom(v.Limits); err != nil {
			return fmt.Errorf("vhost '%s': %w", v.Name, err)
		}
		if err := broker.AddVHost(rec); err != nil {
			return fmt.Errorf("vhost '%s': %w", v.Name, err)
		}
	}
	for _, p := range d.Permissions {
		err := db.SetPermission(auth.Permission{User: p.User, VHost: vhostOrDefault(p.VHost), Configure: p.Configure, Write: p.Write, Read: p.Read})
		if err != nil {
			return fmt.Errorf("permissions of '%s' in vhost '%s': %w", p.User, p.VHost, err)
		}
	}
	for _, p := range d.TopicPermissions {
		err := db.SetTopicPermission(auth.TopicPermission{User: p.User, VHost: vhostOrDefault(p.VHost), Exchange: p.Exchange, Write: p.Write, Read: p.Read})
		if err != nil {
			return fmt.Errorf("topic permissions of '%s' in vhost '%s': %w", p.User, p.VHost, err)
		}
	}
	for _, p := range d.Parameters {
		if p.Component != "vhost-limits" {
			continue // federation, shovel, ...: not supported; ignored
		}
		limits, err := limitsFrom(p.Value)
		if err != nil {
			return fmt.Errorf("vhost-limits of '%s': %w", p.VHost, err)
		}
		if err := db.SetVHostLimits(vhostOrDefault(p.VHost), limits); err != nil {
			return fmt.Errorf("vhost-limits of '%s': %w", p.VHost, err)
		}
	}
	return nil
}

func vhostOrDefault(v string) string {
	if v == "" {
		return "/"
	}
	return v
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

package mgmt

import (
	"net/http"
	"slices"

	"github.com/warrenmq/warren/auth"
)

// Authorization follows RabbitMQ 3.10's management plugin
// (rabbit_mgmt_util:is_authorized*):
//
//   - a user without one of the tags management, policymaker, monitoring or
//     administrator cannot log in (401 "Not management user");
//   - administrator endpoints (users, permissions, vhost records,
//     definitions, user limits, limit changes) need the administrator tag
//     (401 "Not administrator user");
//   - endpoints naming a vhost need a permission in that vhost, whatever the
//     tags (401 "User not authorised to access virtual host");
//   - policy changes need policymaker or administrator;
//   - lists show management and policymaker users only the vhosts they have
//     permissions in, and only their own connections and channels;
//     monitoring and administrator users see everything.
//
// RabbitMQ answers all of these refusals with 401 and
// {"error":"not_authorised"}, and so does Warren.

// access is what a route requires beyond a management login.
type access int

const (
	accessAny     access = iota // any management user; the vhost in the path must be accessible
	accessMonitor               // monitoring or administrator
	accessPolicy                // policymaker or administrator, and vhost access
	accessAdmin                 // administrator (no vhost check)
)

// listScope says how a list is filtered for users who may not see all.
type listScope int

const (
	scopeVHost     listScope = iota // items carry "vhost" (or "queue.vhost")
	scopeVHostName                  // items are vhosts: "name"
	scopeOwn                        // items carry "user": only the caller's own unless monitoring
)

// managementTags are the tags that allow a login to the management API.
var managementTags = []string{"management", "policymaker", "monitoring", "administrator"}

func hasAnyTag(u auth.User, tags ...string) bool {
	return slices.ContainsFunc(tags, u.HasTag)
}

func isAdmin(u auth.User) bool       { return u.HasTag("administrator") }
func isMonitor(u auth.User) bool     { return hasAnyTag(u, "administrator", "monitoring") }
func isPolicymaker(u auth.User) bool { return hasAnyTag(u, "administrator", "policymaker") }

// notAuthorised is RabbitMQ's refusal of an authenticated user.
func notAuthorised(reason string) error {
	return &httpError{http.StatusUnauthorized, "not_authorised", reason, nil}
}

// authorize checks a matched route against the request's user.
func (s *Server) authorize(q *request, rt route) error {
	u := q.u
	switch rt.access {
	case accessAdmin:
		if !isAdmin(u) {
			return notAuthorised("Not administrator user")
		}
		return nil
	case accessMonitor:
		if !isMonitor(u) {
			return notAuthorised("Not monitor user")
		}
	case accessPolicy:
		if !isPolicymaker(u) {
			return notAuthorised("User not authorised to access object")
		}
	}
	if v, ok := q.p["vhost"]; ok {
		if _, exists := s.broker.Auth().VHost(v); exists && !s.broker.Auth().CanAccessVHost(u.Name, v) {
			if rt.access == accessPolicy {
				return notAuthorised("User not authorised to access object")
			}
			return notAuthorised("User not authorised to access virtual host")
		}
	}
	return nil
}

// canSeeVHost reports whether the request's user may see vhost's objects
// in lists.
func (q *request) canSeeVHost(db *auth.DB, vhost string) bool {
	return isMonitor(q.u) || db.CanAccessVHost(q.u.Name, vhost)
}

// vhosted is an item whose vhost is known without encoding it.
type vhosted interface{ itemVHost() string }

// shown reports whether the request's user may see a list item; asMap
// gives the item as a JSON object when its fields must be read.
func (q *request) shown(it any, asMap func() map[string]any) bool {
	if q.db == nil || (isMonitor(q.u) && q.scope != scopeOwn) {
		return true
	}
	if v, ok := it.(vhosted); ok && q.scope == scopeVHost {
		return q.canSeeVHost(q.db, v.itemVHost())
	}
	m := asMap()
	if m == nil {
		return true // not an object: nothing to filter on
	}
	return q.itemVisible(m)
}

func (q *request) itemVisible(it map[string]any) bool {
	switch q.scope {
	case scopeOwn:
		if !isMonitor(q.u) {
			if u, _ := it["user"].(string); u != q.u.Name {
				return false
			}
		}
		return true
	case scopeVHostName:
		name, _ := it["name"].(string)
		return q.canSeeVHost(q.db, name)
	}
	if v, ok := it["vhost"].(string); ok {
		return q.canSeeVHost(q.db, v)
	}
	if qr, ok := it["queue"].(map[string]any); ok {
		if v, ok := qr["vhost"].(string); ok {
			return q.canSeeVHost(q.db, v)
		}
	}
	return true
}

package server

import (
	"slices"

	"github.com/warrenmq/warren/queue/quorum"
)

// Features: what a node's build applies that earlier builds did not,
// where every replica must apply a log alike. Each node names its
// features in its node.started command (earlier builds name none), the
// metadata group keeps them by node (and in its snapshots), and a
// quorum queue turns a feature on only once every member of its group
// has it (quorum.Config.Features): during a rolling upgrade the old
// members would apply the log otherwise.

// nodeFeatures are this build's features.
var nodeFeatures = []string{quorum.FeatureFifoRules, quorum.FeatureKeepOnLeave}

// setFeatures records node's features, from its node.started command
// (FSM goroutine). A change makes this node's quorum groups propose their
// config again (their leaders do): one may turn fifoRules on now.
func (m *meta) setFeatures(node string, fs []string) {
	m.featMu.Lock()
	if m.features == nil {
		m.features = map[string][]string{}
	}
	changed := !slices.Equal(m.features[node], fs)
	m.features[node] = slices.Clone(fs)
	m.featMu.Unlock()
	if changed && m.s.quorum != nil {
		go func() {
			for _, q := range m.s.quorum.Queues() {
				q.RefreshConfig()
			}
		}()
	}
}

// hasFeature reports whether every one of nodes has feature f.
func (m *meta) hasFeature(f string, nodes []string) bool {
	m.featMu.Lock()
	defer m.featMu.Unlock()
	for _, n := range nodes {
		if !slices.Contains(m.features[n], f) {
			return false
		}
	}
	return true
}

// featuresSnapshot copies the features by node, for a snapshot.
func (m *meta) featuresSnapshot() map[string][]string {
	m.featMu.Lock()
	defer m.featMu.Unlock()
	out := make(map[string][]string, len(m.features))
	for n, fs := range m.features {
		out[n] = slices.Clone(fs)
	}
	return out
}

// missingFeature names a feature every one of members has and node has
// not ("" none): a replica on node would apply their group's log by
// other rules, so it cannot join them (AddQuorumMember refuses). The
// features are the members' own, not this build's: a node that knows
// fewer features than the members serving the request refuses too. A
// node whose node.started is not applied yet counts as having none.
func (m *meta) missingFeature(node string, members []string) string {
	m.featMu.Lock()
	defer m.featMu.Unlock()
	if len(members) == 0 {
		return ""
	}
	for _, f := range m.features[members[0]] {
		all := !slices.Contains(m.features[node], f)
		for _, n := range members[1:] {
			all = all && slices.Contains(m.features[n], f)
		}
		if all {
			return f
		}
	}
	return ""
}

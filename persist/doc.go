// Package persist keeps Warren's durable state: definitions and persistent
// messages, on Badger v4.
package persist

import _ "github.com/dgraph-io/badger/v4" // pinned in go.mod for this package

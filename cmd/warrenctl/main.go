// Command warrenctl manages a Warren broker (or a RabbitMQ one) through its
// management HTTP API: list queues, exchanges, bindings, connections and
// users; declare, delete and purge; export and import definitions; publish
// and get messages for debugging.
//
//	warrenctl --url http://127.0.0.1:15672 --user guest --password guest list queues
//	warrenctl declare queue orders --arg x-max-length=1000
//	warrenctl publish --routing-key orders --payload hello
//	warrenctl get orders --count 5 --format json
//
// Connection flags can also come from WARRENCTL_URL, WARRENCTL_USER,
// WARRENCTL_PASSWORD and WARRENCTL_VHOST.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "warrenctl:", err)
		os.Exit(1)
	}
}

// run executes one command line.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	return root.Execute()
}

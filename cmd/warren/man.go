package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// writeManPage writes warren(8) in roff, generated from the flag
// definitions (warren --man-page > warren.8; scripts/release.sh does it).
func writeManPage(w io.Writer, fs *flag.FlagSet, version string) {
	esc := func(s string) string {
		s = strings.ReplaceAll(s, `\`, `\e`)
		s = strings.ReplaceAll(s, "-", `\-`)
		if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
			s = `\&` + s
		}
		return s
	}
	fmt.Fprintf(w, ".TH WARREN 8 %q %q \"Warren manual\"\n", time.Now().UTC().Format("2006-01-02"), "warren "+version)
	fmt.Fprint(w, ".SH NAME\nwarren \\- AMQP 0\\-9\\-1 message broker, compatible with RabbitMQ clients\n")
	fmt.Fprint(w, ".SH SYNOPSIS\n.B warren\n[\\fIflags\\fR]\n")
	fmt.Fprint(w, ".SH DESCRIPTION\n"+esc("Warren is an AMQP 0-9-1 broker. Every flag can also be set as an environment variable "+
		"(WARREN_ and the flag name in upper case with '-' as '_') or in the --config file, whose keys are flag names "+
		"or rabbitmq.conf keys. The command line wins over the environment, which wins over the file. "+
		"SIGTERM or SIGINT closes every connection with 320 CONNECTION_FORCED and exits. "+
		"Under systemd (Type=notify) it sends READY=1 once its listeners are open and STOPPING=1 at shutdown.")+"\n")
	fmt.Fprint(w, ".SH OPTIONS\n")
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "man-page" {
			return
		}
		env := "WARREN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		fmt.Fprintf(w, ".TP\n.BR \\-\\-%s \" \" %s\n%s", esc(f.Name), env, esc(f.Usage))
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default: %s)", esc(f.DefValue))
		}
		fmt.Fprintln(w)
	})
	fmt.Fprint(w, ".SH SEE ALSO\n"+esc("warrenctl(1); README.md for the rabbitmq.conf keys and the health-check endpoints.")+"\n")
}

// Command specgen generates the method structs, codecs and constants of
// package amqp from the extended AMQP 0-9-1 specification XML.
//
// It is strict on purpose: any element, attribute, domain type or assert it
// does not understand is a fatal error, so a changed spec cannot silently
// produce a wrong codec. Output is gofmt'ed and deterministic.
//
// Usage (from package amqp, via go:generate):
//
//	go run ./internal/specgen [-spec spec/amqp0-9-1.stripped.extended.xml] [-out .]
package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	spec := flag.String("spec", "spec/amqp0-9-1.stripped.extended.xml", "path to the spec XML")
	out := flag.String("out", ".", "output directory")
	flag.Parse()
	if err := run(*spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "specgen:", err)
		os.Exit(1)
	}
}

func run(specPath, outDir string) error {
	f, err := os.Open(specPath)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := parseTree(f)
	if err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	if err := validate(root, "amqp"); err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	sp, err := buildSpec(root)
	if err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	for name, gen := range map[string]func(*spec) []byte{
		"constants_gen.go": genConstants,
		"methods_gen.go":   genMethods,
	} {
		src, err := format.Source(gen(sp))
		if err != nil {
			return fmt.Errorf("formatting %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(outDir, name), src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ---- generic XML tree and schema -------------------------------------------

type node struct {
	name     string
	attrs    map[string]string
	children []*node
	line     int
}

func (n *node) attr(k string) string { return n.attrs[k] }

func parseTree(r io.Reader) (*node, error) {
	dec := xml.NewDecoder(r)
	var stack []*node
	var root *node
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := dec.InputPos()
		switch t := tok.(type) {
		case xml.StartElement:
			n := &node{name: t.Name.Local, attrs: map[string]string{}, line: line}
			if t.Name.Space != "" {
				return nil, fmt.Errorf("line %d: namespaced element %s:%s", line, t.Name.Space, t.Name.Local)
			}
			for _, a := range t.Attr {
				if a.Name.Space != "" {
					return nil, fmt.Errorf("line %d: namespaced attribute %s:%s", line, a.Name.Space, a.Name.Local)
				}
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, fmt.Errorf("line %d: second root element", line)
				}
				root = n
			} else {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return nil, fmt.Errorf("line %d: unexpected text %q", line, bytes.TrimSpace(t))
			}
		case xml.Comment, xml.ProcInst:
		case xml.Directive:
			return nil, fmt.Errorf("line %d: unexpected directive", line)
		}
	}
	if root == nil {
		return nil, errors.New("empty document")
	}
	return root, nil
}

type elemSchema struct {
	attrs    []string
	required []string
	children []string
}

var schema = map[string]elemSchema{
	"amqp":     {attrs: []string{"major", "minor", "revision", "port"}, required: []string{"major", "minor", "revision"}, children: []string{"constant", "domain", "class"}},
	"constant": {attrs: []string{"name", "value", "class"}, required: []string{"name", "value"}},
	"domain":   {attrs: []string{"name", "type"}, required: []string{"name", "type"}, children: []string{"assert"}},
	"assert":   {attrs: []string{"check", "value", "method", "field"}, required: []string{"check"}},
	"class":    {attrs: []string{"name", "handler", "index"}, required: []string{"name", "index"}, children: []string{"chassis", "method", "field"}},
	"chassis":  {attrs: []string{"name", "implement"}, required: []string{"name", "implement"}},
	"method":   {attrs: []string{"name", "synchronous", "index", "content", "deprecated"}, required: []string{"name", "index"}, children: []string{"chassis", "response", "field"}},
	"response": {attrs: []string{"name"}, required: []string{"name"}},
	"field":    {attrs: []string{"name", "domain", "type", "reserved"}, required: []string{"name"}, children: []string{"assert"}},
}

var knownChecks = map[string]bool{"length": true, "notnull": true, "regexp": true, "le": true}

func validate(n *node, want string) error {
	if n.name != want {
		return fmt.Errorf("line %d: unexpected element <%s>, want <%s>", n.line, n.name, want)
	}
	s, ok := schema[n.name]
	if !ok {
		return fmt.Errorf("line %d: unknown element <%s>", n.line, n.name)
	}
	for k := range n.attrs {
		if !contains(s.attrs, k) {
			return fmt.Errorf("line %d: unknown attribute %s on <%s>", n.line, k, n.name)
		}
	}
	for _, k := range s.required {
		if _, ok := n.attrs[k]; !ok {
			return fmt.Errorf("line %d: <%s> lacks attribute %s", n.line, n.name, k)
		}
	}
	if n.name == "assert" && !knownChecks[n.attr("check")] {
		return fmt.Errorf("line %d: unknown assert check %q", n.line, n.attr("check"))
	}
	for _, c := range n.children {
		if !contains(s.children, c.name) {
			return fmt.Errorf("line %d: unexpected element <%s> inside <%s>", c.line, c.name, n.name)
		}
		if err := validate(c, c.name); err != nil {
			return err
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- semantic model ---------------------------------------------------------

type constant struct {
	name  string // XML name
	value int
	class string // "", "soft-error", "hard-error"
}

type field struct {
	name    string // XML name
	goName  string
	typ     string // primitive type
	comment string
}

type method struct {
	class       *class
	name        string
	index       int
	synchronous bool
	content     bool
	deprecated  bool
	serverRecv  bool
	clientRecv  bool
	fields      []field
}

type class struct {
	name    string
	index   int
	methods []*method
}

type spec struct {
	major, minor, revision int
	constants              []constant
	classes                []*class
}

var primitives = map[string]bool{
	"bit": true, "octet": true, "short": true, "long": true, "longlong": true,
	"shortstr": true, "longstr": true, "timestamp": true, "table": true,
}

// fieldRenames overrides goName for a few XML field names:
//   - class-id/method-id clash with the Method interface's ClassID() and
//     MethodID(). Only the close methods carry them (the failing method's
//     ids), so they become ReplyClassID/ReplyMethodID next to ReplyCode.
//   - confirm.select spells its flag "nowait"; every other method says
//     "no-wait", so it becomes NoWait for one name across methods.
var fieldRenames = map[string]string{"class-id": "ReplyClassID", "method-id": "ReplyMethodID", "nowait": "NoWait"}

var reservedGoNames = map[string]bool{
	"ClassID": true, "MethodID": true, "Name": true, "HasContent": true,
	"Synchronous": true, "AppendArgs": true,
}

// extensions are methods RabbitMQ implements beyond the extended XML. They are
// added only when the XML lacks them, so a future XML that carries them wins.
// A classIndex other than 0 adds the class when the XML lacks it (the
// deprecated access class, which RabbitMQ still answers).
var extensions = []struct {
	class      string
	classIndex int
	method     string
	index      int
	fields     []field
	serverRecv bool
}{
	{class: "connection", method: "blocked", index: 60, fields: []field{{name: "reason", typ: "shortstr"}}},
	{class: "connection", method: "unblocked", index: 61},
	{class: "connection", method: "update-secret", index: 70, serverRecv: true, fields: []field{
		{name: "new-secret", typ: "longstr"}, {name: "reason", typ: "shortstr"},
	}},
	{class: "connection", method: "update-secret-ok", index: 71},
	{class: "access", classIndex: 30, method: "request", index: 10, serverRecv: true, fields: []field{
		{name: "realm", typ: "shortstr"}, {name: "exclusive", typ: "bit"}, {name: "passive", typ: "bit"},
		{name: "active", typ: "bit"}, {name: "write", typ: "bit"}, {name: "read", typ: "bit"},
	}},
	{class: "access", classIndex: 30, method: "request-ok", index: 11, fields: []field{{name: "reserved-1", typ: "short"}}},
}

// extraConstants are reply codes RabbitMQ uses that the XML omits.
var extraConstants = []constant{
	{name: "no-route", value: 312, class: "soft-error"},
}

func atoi(n *node, k string) (int, error) {
	v, err := strconv.Atoi(n.attr(k))
	if err != nil {
		return 0, fmt.Errorf("line %d: <%s %s=%q>: %w", n.line, n.name, k, n.attr(k), err)
	}
	return v, nil
}

func boolAttr(n *node, k string) (bool, error) {
	switch n.attr(k) {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("line %d: <%s %s=%q>: want 0 or 1", n.line, n.name, k, n.attr(k))
}

func buildSpec(root *node) (*spec, error) {
	sp := &spec{}
	var err error
	if sp.major, err = atoi(root, "major"); err != nil {
		return nil, err
	}
	if sp.minor, err = atoi(root, "minor"); err != nil {
		return nil, err
	}
	if sp.revision, err = atoi(root, "revision"); err != nil {
		return nil, err
	}
	domains := map[string]string{}
	seenConst := map[string]bool{}
	for _, c := range root.children {
		switch c.name {
		case "constant":
			v, err := atoi(c, "value")
			if err != nil {
				return nil, err
			}
			switch c.attr("class") {
			case "", "soft-error", "hard-error":
			default:
				return nil, fmt.Errorf("line %d: unknown constant class %q", c.line, c.attr("class"))
			}
			if seenConst[c.attr("name")] {
				return nil, fmt.Errorf("line %d: duplicate constant %s", c.line, c.attr("name"))
			}
			seenConst[c.attr("name")] = true
			sp.constants = append(sp.constants, constant{name: c.attr("name"), value: v, class: c.attr("class")})
		case "domain":
			t := c.attr("type")
			if !primitives[t] {
				return nil, fmt.Errorf("line %d: domain %s has unknown type %q", c.line, c.attr("name"), t)
			}
			if _, dup := domains[c.attr("name")]; dup {
				return nil, fmt.Errorf("line %d: duplicate domain %s", c.line, c.attr("name"))
			}
			domains[c.attr("name")] = t
		}
	}
	for _, x := range extraConstants {
		if !seenConst[x.name] {
			sp.constants = append(sp.constants, x)
		}
	}
	for _, c := range root.children {
		if c.name != "class" {
			continue
		}
		cl := &class{name: c.attr("name")}
		if cl.index, err = atoi(c, "index"); err != nil {
			return nil, err
		}
		seenIdx := map[int]bool{}
		for _, mn := range c.children {
			if mn.name != "method" {
				continue // class-level fields are content properties, handled by hand in properties.go
			}
			m := &method{class: cl, name: mn.attr("name")}
			if m.index, err = atoi(mn, "index"); err != nil {
				return nil, err
			}
			if seenIdx[m.index] {
				return nil, fmt.Errorf("line %d: duplicate method index %d in %s", mn.line, m.index, cl.name)
			}
			seenIdx[m.index] = true
			if m.synchronous, err = boolAttr(mn, "synchronous"); err != nil {
				return nil, err
			}
			if m.content, err = boolAttr(mn, "content"); err != nil {
				return nil, err
			}
			if m.deprecated, err = boolAttr(mn, "deprecated"); err != nil {
				return nil, err
			}
			for _, fc := range mn.children {
				switch fc.name {
				case "chassis":
					switch fc.attr("name") {
					case "server":
						m.serverRecv = true
					case "client":
						m.clientRecv = true
					default:
						return nil, fmt.Errorf("line %d: unknown chassis %q", fc.line, fc.attr("name"))
					}
				case "field":
					f, err := resolveField(fc, domains)
					if err != nil {
						return nil, err
					}
					m.fields = append(m.fields, f)
				}
			}
			if err := checkFieldNames(m); err != nil {
				return nil, err
			}
			cl.methods = append(cl.methods, m)
		}
		sp.classes = append(sp.classes, cl)
	}
	for _, x := range extensions {
		var cl *class
		for _, c := range sp.classes {
			if c.name == x.class {
				cl = c
			}
		}
		if cl == nil && x.classIndex != 0 {
			cl = &class{name: x.class, index: x.classIndex}
			sp.classes = append(sp.classes, cl)
		}
		if cl == nil {
			return nil, fmt.Errorf("extension %s.%s: no class %s", x.class, x.method, x.class)
		}
		present := false
		for _, m := range cl.methods {
			if m.name == x.method {
				present = true
			} else if m.index == x.index {
				return nil, fmt.Errorf("extension %s.%s: index %d taken by %s", x.class, x.method, x.index, m.name)
			}
		}
		if present {
			continue
		}
		m := &method{class: cl, name: x.method, index: x.index, clientRecv: !x.serverRecv, serverRecv: x.serverRecv}
		for _, f := range x.fields {
			f.goName = goName(f.name)
			m.fields = append(m.fields, f)
		}
		cl.methods = append(cl.methods, m)
	}
	for _, cl := range sp.classes {
		sort.SliceStable(cl.methods, func(i, j int) bool { return cl.methods[i].index < cl.methods[j].index })
	}
	sort.SliceStable(sp.classes, func(i, j int) bool { return sp.classes[i].index < sp.classes[j].index })
	return sp, nil
}

func resolveField(fc *node, domains map[string]string) (field, error) {
	f := field{name: fc.attr("name")}
	d, t := fc.attr("domain"), fc.attr("type")
	switch {
	case d != "" && t != "":
		return f, fmt.Errorf("line %d: field %s has both domain and type", fc.line, f.name)
	case d != "":
		rt, ok := domains[d]
		if !ok {
			return f, fmt.Errorf("line %d: field %s: unknown domain %q", fc.line, f.name, d)
		}
		f.typ = rt
		f.comment = "domain " + d
	case t != "":
		if !primitives[t] {
			return f, fmt.Errorf("line %d: field %s: unknown type %q", fc.line, f.name, t)
		}
		f.typ = t
	default:
		return f, fmt.Errorf("line %d: field %s has neither domain nor type", fc.line, f.name)
	}
	if r, err := boolAttr(fc, "reserved"); err != nil {
		return f, err
	} else if r {
		f.comment = "reserved"
	}
	if rn, ok := fieldRenames[f.name]; ok {
		f.goName = rn
	} else {
		f.goName = goName(f.name)
	}
	return f, nil
}

func checkFieldNames(m *method) error {
	seen := map[string]bool{}
	for _, f := range m.fields {
		if reservedGoNames[f.goName] {
			return fmt.Errorf("%s.%s: field %s clashes with a Method method; add a rename", m.class.name, m.name, f.name)
		}
		if seen[f.goName] {
			return fmt.Errorf("%s.%s: duplicate field %s", m.class.name, m.name, f.goName)
		}
		seen[f.goName] = true
	}
	return nil
}

// goName turns "routing-key" into "RoutingKey" and "class-id" into "ClassID".
func goName(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "-") {
		if part == "" {
			continue
		}
		if part == "id" {
			b.WriteString("ID")
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]))
		b.WriteString(part[1:])
	}
	return b.String()
}

func (m *method) goName() string { return goName(m.class.name) + goName(m.name) }

// ---- output -----------------------------------------------------------------

const header = "// Code generated by specgen. DO NOT EDIT.\n\n"

func genConstants(sp *spec) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(header)
	p("package amqp\n\n")
	p("// Protocol version implemented, from the spec.\n")
	p("const (\n\tVersionMajor = %d\n\tVersionMinor = %d\n\tVersionRevision = %d\n)\n\n", sp.major, sp.minor, sp.revision)
	p("// Constants from the spec: frame types and sizes, and reply codes.\n")
	p("// Reply codes marked soft close the channel, hard ones the connection.\n")
	p("const (\n")
	for _, c := range sp.constants {
		cm := ""
		if c.class != "" {
			cm = " // " + c.class
		}
		p("\t%s = %d%s\n", goName(c.name), c.value, cm)
	}
	p(")\n\n")
	p("// Class ids.\nconst (\n")
	for _, cl := range sp.classes {
		p("\tClass%s = %d\n", goName(cl.name), cl.index)
	}
	p(")\n\n")
	p("// Method ids, named Method + class + method.\nconst (\n")
	for _, cl := range sp.classes {
		for _, m := range cl.methods {
			p("\tMethod%s = %d\n", m.goName(), m.index)
		}
	}
	p(")\n\n")

	// Reply codes: constants that carry an error class, plus reply-success.
	var codes []constant
	seen := map[int]bool{}
	for _, c := range sp.constants {
		if (c.class != "" || c.name == "reply-success") && !seen[c.value] {
			seen[c.value] = true
			codes = append(codes, c)
		}
	}
	sort.SliceStable(codes, func(i, j int) bool { return codes[i].value < codes[j].value })
	p("// ReplyText returns the upper-case name RabbitMQ puts in front of reply texts,\n")
	p("// e.g. \"NOT_FOUND\" for 404, or \"UNKNOWN_REPLY_CODE\".\n")
	p("func ReplyText(code uint16) string {\n\tswitch code {\n")
	for _, c := range codes {
		p("\tcase %d:\n\t\treturn %q\n", c.value, strings.ToUpper(strings.ReplaceAll(c.name, "-", "_")))
	}
	p("\t}\n\treturn \"UNKNOWN_REPLY_CODE\"\n}\n\n")
	p("// isHardCode reports whether the spec classes code as a hard (connection) error.\n")
	p("func isHardCode(code uint16) bool {\n\tswitch code {\n\tcase ")
	var hard []string
	for _, c := range codes {
		if c.class == "hard-error" {
			hard = append(hard, strconv.Itoa(c.value))
		}
	}
	p("%s:\n\t\treturn true\n\t}\n\treturn false\n}\n", strings.Join(hard, ", "))
	return b.Bytes()
}

var goTypes = map[string]string{
	"bit": "bool", "octet": "uint8", "short": "uint16", "long": "uint32", "longlong": "uint64",
	"shortstr": "string", "longstr": "string", "timestamp": "time.Time", "table": "Table",
}

func genMethods(sp *spec) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(header)
	p("package amqp\n\n")
	usesTime := false
	for _, cl := range sp.classes {
		for _, m := range cl.methods {
			for _, f := range m.fields {
				if f.typ == "timestamp" {
					usesTime = true
				}
			}
		}
	}
	if usesTime {
		p("import \"time\"\n\n")
	}
	for _, cl := range sp.classes {
		for _, m := range cl.methods {
			genMethod(p, m)
		}
	}

	p("// newMethod returns a zero method value for the ids, or nil if unknown.\n")
	p("func newMethod(classID, methodID uint16) Method {\n\tswitch uint32(classID)<<16 | uint32(methodID) {\n")
	for _, cl := range sp.classes {
		for _, m := range cl.methods {
			p("\tcase %d<<16 | %d:\n\t\treturn new(%s)\n", cl.index, m.index, m.goName())
		}
	}
	p("\t}\n\treturn nil\n}\n\n")

	p("// MethodName returns \"class.method\" for the ids, or \"\" if unknown.\n")
	p("func MethodName(classID, methodID uint16) string {\n\tswitch uint32(classID)<<16 | uint32(methodID) {\n")
	for _, cl := range sp.classes {
		for _, m := range cl.methods {
			p("\tcase %d<<16 | %d:\n\t\treturn %q\n", cl.index, m.index, cl.name+"."+m.name)
		}
	}
	p("\t}\n\treturn \"\"\n}\n\n")

	p("// ServerReceives reports whether the spec's chassis rules let a client send\n")
	p("// the method to a server (chassis name=\"server\").\n")
	p("func ServerReceives(classID, methodID uint16) bool {\n\tswitch uint32(classID)<<16 | uint32(methodID) {\n\tcase ")
	var ids []string
	for _, cl := range sp.classes {
		for _, m := range cl.methods {
			if m.serverRecv {
				ids = append(ids, fmt.Sprintf("%d<<16 | %d", cl.index, m.index))
			}
		}
	}
	p("%s:\n\t\treturn true\n\t}\n\treturn false\n}\n", strings.Join(ids, ",\n\t\t"))
	return b.Bytes()
}

func genMethod(p func(string, ...any), m *method) {
	gn := m.goName()
	full := m.class.name + "." + m.name
	attrs := []string{}
	if m.synchronous {
		attrs = append(attrs, "synchronous")
	}
	if m.content {
		attrs = append(attrs, "carries content")
	}
	if m.deprecated {
		attrs = append(attrs, "deprecated")
	}
	note := ""
	if len(attrs) > 0 {
		note = "; " + strings.Join(attrs, ", ")
	}
	p("// %s is %s (class %d, method %d%s).\n", gn, full, m.class.index, m.index, note)
	p("type %s struct {\n", gn)
	for _, f := range m.fields {
		c := f.name + " " + f.typ
		if f.comment != "" {
			c += ", " + f.comment
		}
		p("\t%s %s // %s\n", f.goName, goTypes[f.typ], c)
	}
	p("}\n\n")
	p("func (*%s) ClassID() uint16 { return %d }\n", gn, m.class.index)
	p("func (*%s) MethodID() uint16 { return %d }\n", gn, m.index)
	p("func (*%s) Name() string { return %q }\n", gn, full)
	p("func (*%s) HasContent() bool { return %v }\n", gn, m.content)
	p("func (*%s) Synchronous() bool { return %v }\n\n", gn, m.synchronous)

	// Encoder.
	recv := "m"
	if len(m.fields) == 0 {
		recv = ""
	}
	p("func (%s *%s) AppendArgs(dst []byte) ([]byte, error) {\n", recv, gn)
	needErr := false
	for _, f := range m.fields {
		if f.typ == "shortstr" || f.typ == "longstr" || f.typ == "table" {
			needErr = true
		}
	}
	if needErr {
		p("\tvar err error\n")
	}
	fs := m.fields
	for i := 0; i < len(fs); {
		f := fs[i]
		if f.typ == "bit" {
			j := i
			for j < len(fs) && fs[j].typ == "bit" && j-i < 8 {
				j++
			}
			p("\tvar bits%d uint8\n", i)
			for k := i; k < j; k++ {
				p("\tif m.%s {\n\t\tbits%d |= 1 << %d\n\t}\n", fs[k].goName, i, k-i)
			}
			p("\tdst = append(dst, bits%d)\n", i)
			i = j
			continue
		}
		switch f.typ {
		case "octet":
			p("\tdst = append(dst, m.%s)\n", f.goName)
		case "short":
			p("\tdst = appendU16(dst, m.%s)\n", f.goName)
		case "long":
			p("\tdst = appendU32(dst, m.%s)\n", f.goName)
		case "longlong":
			p("\tdst = appendU64(dst, m.%s)\n", f.goName)
		case "timestamp":
			p("\tdst = appendTimestamp(dst, m.%s)\n", f.goName)
		case "shortstr":
			p("\tif dst, err = appendShortstr(dst, m.%s); err != nil {\n\t\treturn dst, fieldErr(%q, err)\n\t}\n", f.goName, full+"."+f.name)
		case "longstr":
			p("\tif dst, err = appendLongstr(dst, m.%s); err != nil {\n\t\treturn dst, fieldErr(%q, err)\n\t}\n", f.goName, full+"."+f.name)
		case "table":
			p("\tif dst, err = AppendTable(dst, m.%s); err != nil {\n\t\treturn dst, fieldErr(%q, err)\n\t}\n", f.goName, full+"."+f.name)
		default:
			panic("unhandled type " + f.typ) // unreachable: types validated in resolveField
		}
		i++
	}
	p("\treturn dst, nil\n}\n\n")

	// Shortstr check.
	var strs []string
	for _, f := range m.fields {
		if f.typ == "shortstr" {
			strs = append(strs, "validShortstr(m."+f.goName+")")
		}
	}
	if len(strs) > 0 {
		p("func (m *%s) shortstrsValid() bool {\n\treturn %s\n}\n\n", gn, strings.Join(strs, " && "))
	}

	// Decoder.
	if len(m.fields) == 0 {
		p("func (*%s) decodeArgs(b []byte) error { return noArgs(b) }\n\n", gn)
		return
	}
	p("func (m *%s) decodeArgs(b []byte) error {\n\td := newDecoder(b)\n", gn)
	for i := 0; i < len(fs); {
		f := fs[i]
		if f.typ == "bit" {
			j := i
			for j < len(fs) && fs[j].typ == "bit" && j-i < 8 {
				j++
			}
			p("\tbits%d := d.u8()\n", i)
			for k := i; k < j; k++ {
				p("\tm.%s = bits%d&(1<<%d) != 0\n", fs[k].goName, i, k-i)
			}
			i = j
			continue
		}
		fn := map[string]string{
			"octet": "u8", "short": "u16", "long": "u32", "longlong": "u64", "timestamp": "timestamp",
			"shortstr": "shortstr", "longstr": "longstr", "table": "table",
		}[f.typ]
		if f.typ == "shortstr" || f.typ == "longstr" {
			p("\td.%s(&m.%s)\n", fn, f.goName)
		} else {
			p("\tm.%s = d.%s()\n", f.goName, fn)
		}
		i++
	}
	p("\treturn d.finish()\n}\n\n")
}

package mgmt

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// page is RabbitMQ's paginated list answer, sent when a list request has a
// page parameter.
type page struct {
	FilteredCount int   `json:"filtered_count"`
	ItemCount     int   `json:"item_count"`
	Items         []any `json:"items"`
	Page          int   `json:"page"`
	PageCount     int   `json:"page_count"`
	PageSize      int   `json:"page_size"`
	TotalCount    int   `json:"total_count"`
}

// list is a list answer's items, made into their JSON objects one at a
// time, so that a list of 100,000 queues is never held as 100,000 JSON
// objects (or one 40 MB buffer) at once.
type list struct {
	n  int
	at func(i int) any // item i's JSON object; the same each time it is asked
}

// listOf is the list of conv(x) for each x of xs.
func listOf[T, J any](xs []T, conv func(T) J) list {
	return list{n: len(xs), at: func(i int) any { return conv(xs[i]) }}
}

// toList takes a list, or a slice of JSON objects.
func toList(items any) list {
	if l, ok := items.(list); ok {
		return l
	}
	v := reflect.ValueOf(items)
	if v.Kind() != reflect.Slice {
		return list{n: 1, at: func(int) any { return items }}
	}
	return list{n: v.Len(), at: func(i int) any { return v.Index(i).Interface() }}
}

// named is an item whose "name" is known without reflection.
type named interface{ itemName() string }

// replyList answers a list (a list or a slice): streamed as a JSON array,
// or, with ?page=N, as RabbitMQ's page object, filtered by name (a
// substring, or a regular expression with use_regex=true), sorted by sort
// (a field, dotted for nested ones; sort_reverse=true reverses) and cut to
// page_size items (default 100, at most 500). Either way only the items
// the user may see are counted and sent.
//
// Paging keeps one small entry per matching item (its index and sort
// key, read from the item in place by its JSON names) and makes the
// page's items again: a page of 100,000 queues encodes 100 of them.
func (q *request) replyList(items any) error {
	l := toList(items)
	v := q.r.URL.Query()
	if !v.Has("page") {
		return q.streamList(l)
	}
	n, err := strconv.Atoi(v.Get("page"))
	if err != nil || n < 1 {
		return badRequest("page must be a positive integer")
	}
	size := 100
	if s := v.Get("page_size"); s != "" {
		if size, err = strconv.Atoi(s); err != nil || size < 1 || size > 500 {
			return badRequest("page_size must be between 1 and 500")
		}
	}
	var match func(string) bool
	if name := v.Get("name"); name != "" {
		match = func(s string) bool { return strings.Contains(s, name) }
		if v.Get("use_regex") == "true" {
			re, err := regexp.Compile(name)
			if err != nil {
				return badRequest("name: %v", err)
			}
			match = re.MatchString
		}
	}
	key := v.Get("sort")
	type entry struct {
		i   int
		key any
	}
	names := jsonNames{}
	var kept []entry
	total := 0
	for i := range l.n {
		it := l.at(i)
		if !q.shown(it, func() map[string]any { return jsonObject(it) }) {
			continue
		}
		total++
		if match != nil && !match(itemName(names, it)) {
			continue
		}
		e := entry{i: i}
		switch key {
		case "":
		case "name":
			e.key = itemName(names, it)
		default:
			e.key = names.field(reflect.ValueOf(it), key)
		}
		kept = append(kept, e)
	}
	if key != "" {
		slices.SortStableFunc(kept, func(a, b entry) int { return compareJSON(a.key, b.key) })
		if v.Get("sort_reverse") == "true" {
			slices.Reverse(kept)
		}
	}
	p := page{
		FilteredCount: len(kept), Page: n, PageSize: size, TotalCount: total,
		PageCount: max(1, (len(kept)+size-1)/size), Items: []any{},
	}
	if n > p.PageCount {
		return badRequest("page out of range")
	}
	if lo := (n - 1) * size; lo < len(kept) {
		for _, e := range kept[lo:min(lo+size, len(kept))] {
			p.Items = append(p.Items, l.at(e.i))
		}
	}
	p.ItemCount = len(p.Items)
	return q.reply(p)
}

// streamList writes the items the user may see as a JSON array, item by
// item through a small buffer.
func (q *request) streamList(l list) error {
	w := q.w
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteByte('[')
	first := true
	for i := range l.n {
		it := l.at(i)
		if !q.shown(it, func() map[string]any { return jsonObject(it) }) {
			continue
		}
		b, err := json.Marshal(it)
		if err != nil {
			// The status is sent: cut the answer short, so the client
			// sees invalid JSON rather than a silently shorter list.
			q.s.log.Error().Err(err).Str("path", q.r.URL.EscapedPath()).Msg("management list item cannot be encoded")
			bw.Flush()
			return nil
		}
		if !first {
			bw.WriteByte(',')
		}
		first = false
		if _, err := bw.Write(b); err != nil {
			return nil // the client is gone
		}
	}
	bw.WriteByte(']')
	bw.Flush()
	return nil
}

// jsonObject is v encoded and decoded as a JSON object (nil if it is not
// one).
func jsonObject(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func itemName(names jsonNames, it any) string {
	if n, ok := it.(named); ok {
		return n.itemName()
	}
	s, _ := names.field(reflect.ValueOf(it), "name").(string)
	return s
}

// fielder is a value that writes its own JSON and gives its fields by
// their JSON names (messageStatsJSON).
type fielder interface {
	jsonField(name string) reflect.Value
}

// field reads the value at a dotted path of JSON names in v (structs by
// their json tags, maps by key), as JSON would decode it: numbers as
// float64, nil where the path ends.
func (c jsonNames) field(v reflect.Value, path string) any {
	for _, part := range strings.Split(path, ".") {
		v = deref(v)
		if !v.IsValid() || !v.CanInterface() {
			return nil
		}
		if f, ok := v.Interface().(fielder); ok {
			v = f.jsonField(part)
			continue
		}
		switch v.Kind() {
		case reflect.Struct:
			i, ok := c.index(v.Type(), part)
			if !ok {
				return nil
			}
			v = v.Field(i)
		case reflect.Map:
			if v.Type().Key().Kind() != reflect.String {
				return nil
			}
			v = v.MapIndex(reflect.ValueOf(part).Convert(v.Type().Key()))
			if !v.IsValid() {
				return nil
			}
		default:
			return nil
		}
	}
	v = deref(v)
	switch v.Kind() {
	case reflect.Invalid:
		return nil
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return v.Float()
	}
	// Lists and objects compare by their JSON text, as decoded values did.
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return nil
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// jsonNames maps, per struct type, each JSON name to its field index; one
// request builds it as it goes.
type jsonNames map[reflect.Type]map[string]int

func (c jsonNames) index(t reflect.Type, name string) (int, bool) {
	m, ok := c[t]
	if !ok {
		m = map[string]int{}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch tag {
			case "-":
				continue
			case "":
				tag = f.Name
			}
			m[tag] = i
		}
		c[t] = m
	}
	i, ok := m[name]
	return i, ok
}

// compareJSON orders JSON values: numbers numerically, anything else by its
// text.
func compareJSON(a, b any) int {
	fa, aok := a.(float64)
	fb, bok := b.(float64)
	if aok && bok {
		return cmp.Compare(fa, fb)
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

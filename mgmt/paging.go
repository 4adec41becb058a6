package mgmt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// page is RabbitMQ's paginated list answer, sent when a list request has a
// page parameter.
type page struct {
	FilteredCount int              `json:"filtered_count"`
	ItemCount     int              `json:"item_count"`
	Items         []map[string]any `json:"items"`
	Page          int              `json:"page"`
	PageCount     int              `json:"page_count"`
	PageSize      int              `json:"page_size"`
	TotalCount    int              `json:"total_count"`
}

// replyList answers a list: as is, or, with ?page=N, as RabbitMQ's page
// object, filtered by name (a substring, or a regular expression with
// use_regex=true), sorted by sort (a field, dotted for nested ones;
// sort_reverse=true reverses) and cut to page_size items (default 100,
// at most 500).
func (q *request) replyList(items any) error {
	items, err := q.visible(items)
	if err != nil {
		return err
	}
	v := q.r.URL.Query()
	if !v.Has("page") {
		return q.reply(items)
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
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	var all []map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	filtered := all
	if name := v.Get("name"); name != "" {
		match := func(s string) bool { return strings.Contains(s, name) }
		if v.Get("use_regex") == "true" {
			re, err := regexp.Compile(name)
			if err != nil {
				return badRequest("name: %v", err)
			}
			match = re.MatchString
		}
		filtered = nil
		for _, it := range all {
			if s, _ := it["name"].(string); match(s) {
				filtered = append(filtered, it)
			}
		}
	}
	if key := v.Get("sort"); key != "" {
		slices.SortStableFunc(filtered, func(a, b map[string]any) int { return compareJSON(field(a, key), field(b, key)) })
		if v.Get("sort_reverse") == "true" {
			slices.Reverse(filtered)
		}
	}
	p := page{
		FilteredCount: len(filtered), Page: n, PageSize: size, TotalCount: len(all),
		PageCount: max(1, (len(filtered)+size-1)/size), Items: []map[string]any{},
	}
	if n > p.PageCount {
		return badRequest("page out of range")
	}
	if lo := (n - 1) * size; lo < len(filtered) {
		p.Items = filtered[lo:min(lo+size, len(filtered))]
	}
	p.ItemCount = len(p.Items)
	return q.reply(p)
}

func field(m map[string]any, path string) any {
	var v any = m
	for _, part := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[part]
	}
	return v
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

package main

// The feed's retention: retention.

import (
	"strconv"
	"time"
)

func init() {
	register(command{name: "retention", order: 77, args: "[--max-age DURATION --max-notifications N]", summary: "show, or set, how long and how many notifications the feed keeps", run: retention})
}

func retention(e *env, args []string) int {
	fset := e.flags()
	age := fset.String("max-age", "", "keep notifications this `DURATION` (1m to 8760h; e.g. 24h) of operation time")
	count := fset.String("max-notifications", "", "keep at most the newest `N` notifications (1000 to 100000000)")
	if _, code, ok := e.parse(fset, args, 0, 0); !ok {
		return code
	}
	if *age == "" && *count == "" {
		return e.show("GET", "/feed/retention", nil)
	}
	if *age == "" || *count == "" {
		return e.fail(badArg("give both --max-age and --max-notifications"))
	}
	d, err := time.ParseDuration(*age)
	if err != nil || d <= 0 || d%time.Second != 0 {
		return e.fail(badArg("--max-age %q is not a duration of whole seconds (as 90s, 30m, 24h)", *age))
	}
	n, err := strconv.ParseUint(*count, 10, 64)
	if err != nil {
		return e.fail(badArg("--max-notifications %q is not a count", *count))
	}
	// The server checks the ranges (108 INVALID_ARGUMENT names them).
	return e.show("PUT", "/feed/retention", map[string]any{"max_age_s": uint64(d / time.Second), "max_notifications": n})
}

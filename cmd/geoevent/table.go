package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// table writes aligned columns.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// printEvents writes events as a table: one row an event, distances when
// the events have them, then a line that says whether more would follow.
func printEvents(w io.Writer, evs []*event, hasMore bool) {
	dist := false
	for _, ev := range evs {
		if ev != nil && ev.DistanceMM != nil {
			dist = true
		}
	}
	n := 0
	for _, ev := range evs {
		if ev != nil {
			n++
		}
	}
	more := ""
	if hasMore {
		more = " (more match: raise --limit)"
	}
	defer fmt.Fprintf(w, "%d %s%s\n", n, plural(n, "event", "events"), more)
	if n == 0 {
		return
	}
	tw := table(w)
	fmt.Fprint(tw, "ENTITY\tLAT\tLON\tTIME\tGROUP\tTTL_S")
	if dist {
		fmt.Fprint(tw, "\tDISTANCE_M")
	}
	fmt.Fprintln(tw)
	for _, ev := range evs {
		if ev == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", ev.EntityID, degrees(ev.Lat), degrees(ev.Lon),
			formatTime(ev.TimestampNS.int64()), ev.GroupID, ev.TTLSeconds)
		if dist {
			d := "-"
			if ev.DistanceMM != nil {
				d = strconv.FormatFloat(float64(ev.DistanceMM.int64())/1000, 'f', 3, 64)
			}
			fmt.Fprintf(tw, "\t%s", d)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// degrees renders degrees with nanodegree precision and no trailing zeros.
func degrees(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printRaw writes a server answer as it came, ending with one newline.
func printRaw(w io.Writer, raw []byte) {
	for len(raw) > 0 && (raw[len(raw)-1] == '\n' || raw[len(raw)-1] == '\r') {
		raw = raw[:len(raw)-1]
	}
	fmt.Fprintf(w, "%s\n", raw)
}

// printFields writes name-value pairs as two aligned columns.
func printFields(w io.Writer, kv ...string) {
	tw := table(w)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s\t%s\n", kv[i], kv[i+1])
	}
	tw.Flush()
}

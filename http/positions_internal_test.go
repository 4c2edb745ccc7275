package http

import (
	"testing"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine"
)

// FuzzPositionParams: whatever the query string, the position stream's
// parser answers a failure or an area the fence test accepts, with
// corners on the globe and latitudes in order.
func FuzzPositionParams(f *testing.F) {
	for _, s := range []string{"", "bbox=1,2,3,4", "bbox=-90,-180,90,180&group_id=7", "bbox=10,170,20,-170",
		"bbox=3,0,1,0", "bbox=1,2,3", "bbox=1,2,3,4,5", "bbox=91,0,92,0", "bbox=1e2,0,1,0", "bbox=0.000000001,-0,1,1",
		"bbox=a,b,c,d", "bbox= 1,2,3,4", "fence=depot", "fence=a%20b", "fence=depot&bbox=1,2,3,4",
		"group_id=-1&bbox=0,0,1,1", "group_id=18446744073709551616&bbox=0,0,1,1", "form=a&group_id=-5&fence=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, bad := parseParams(raw, "bbox", "fence", "group_id")
		if bad != nil {
			return
		}
		fm, bad := p.form()
		if bad != nil {
			return
		}
		req, bad := parsePositionParams(p, fm)
		if bad != nil {
			if bad.info.Code == 0 {
				t.Fatalf("%q: a failure without a code", raw)
			}
			return
		}
		if (req.box == nil) == (req.fence == "") {
			t.Fatalf("%q: box %v and fence %q", raw, req.box, req.fence)
		}
		if req.fence != "" && !core.ValidFenceName(req.fence) {
			t.Fatalf("%q: accepted fence name %q", raw, req.fence)
		}
		if req.box != nil {
			if req.box.Min.LatNano > req.box.Max.LatNano {
				t.Fatalf("%q: inverted latitudes accepted", raw)
			}
			if _, _, err := statemachine.FenceArea(req.box); err != nil {
				t.Fatalf("%q: accepted a box the fence test refuses: %v", raw, err)
			}
		}
	})
}

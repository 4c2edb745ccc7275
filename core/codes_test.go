package core

import "testing"

// TestCodeTable checks every row lies in its category's range with a status
// that category allows, and that the spec's codes carry the spec's names.
func TestCodeTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Name] {
			t.Errorf("name %s appears twice", c.Name)
		}
		seen[c.Name] = true
		switch c.HTTPStatus {
		case 200, 400, 404, 500, 503, 504:
		default:
			t.Errorf("%s: HTTP status %d is not one of the spec's", c.Name, c.HTTPStatus)
		}
		if c.Code >= 100 && c.Code < 200 && c.Retryable {
			t.Errorf("%s: validation errors are never retryable", c.Name)
		}
		if c.Code >= 300 && c.Code < 400 && c.Retryable {
			t.Errorf("%s: limit errors are never retryable", c.Name)
		}
	}
	spec := map[Code][]string{
		3: {"ENTITY_NOT_FOUND"}, 7: {"ENTITY_ID_MUST_NOT_BE_ZERO"}, 9: {"LAT_OUT_OF_RANGE"},
		10: {"LON_OUT_OF_RANGE"}, 100: {"INVALID_COORDINATES"},
		101: {"INVALID_ENTITY_ID", "INVALID_RADIUS", "EMPTY_REQUEST"}, 102: {"POLYGON_TOO_COMPLEX"},
		103: {"INVALID_POLYGON"}, 106: {"NO_TTL_SET"}, 211: {"CLUSTER_UNAVAILABLE"},
		213: {"FOLLOWER_READ_ONLY"}, 214: {"STALE_FOLLOWER"}, 215: {"PRIMARY_UNREACHABLE"},
		216: {"REPLICATION_TIMEOUT"}, 217: {"CONFLICT_DETECTED"}, 218: {"GEO_SHARD_MISMATCH"},
		220: {"NOT_SHARD_LEADER"}, 221: {"SHARD_UNAVAILABLE"}, 222: {"RESHARDING_IN_PROGRESS"},
		223: {"INVALID_SHARD_COUNT"}, 224: {"SHARD_MIGRATION_FAILED"},
		300: {"BATCH_TOO_LARGE", "QUERY_RESULT_TOO_LARGE"}, 410: {"ENCRYPTION_KEY_UNAVAILABLE"},
		411: {"DECRYPTION_FAILED"}, 412: {"ENCRYPTION_NOT_ENABLED"}, 413: {"KEY_ROTATION_IN_PROGRESS"},
		414: {"UNSUPPORTED_ENCRYPTION_VERSION"},
	}
	retryable := map[Code]bool{211: true, 214: true, 215: true, 216: true, 220: true, 221: true, 222: true, 410: true, 413: true}
	for code, names := range spec {
		for _, name := range names {
			found := false
			for _, c := range Codes {
				if c.Code == code && c.Name == name {
					found = true
					if c.Retryable != retryable[code] {
						t.Errorf("%d %s: retryable %v, spec says %v", code, name, c.Retryable, retryable[code])
					}
				}
			}
			if !found {
				t.Errorf("spec code %d %s is missing from the table", code, name)
			}
		}
		if info, ok := code.Info(); !ok || info.Name != names[0] {
			t.Errorf("Code(%d).Info() = %v, %v; want primary name %s", code, info.Name, ok, names[0])
		}
	}
}

func TestBatchCode(t *testing.T) {
	for c, want := range map[Code]Code{9: 100, 10: 100, 7: 101, 8: 105, 11: 105, 14: 105} {
		if got := BatchCode(c).Code; got != want {
			t.Errorf("BatchCode(%d) = %d, want %d", c, got, want)
		}
	}
}
